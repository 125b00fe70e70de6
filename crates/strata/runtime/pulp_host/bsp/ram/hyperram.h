/* strata's host PMSIS: the HyperRAM configuration is declared in pmsis.h. */
#include "pmsis.h"
