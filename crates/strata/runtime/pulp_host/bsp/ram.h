/* strata's host PMSIS: the RAM API is declared in pmsis.h. */
#include "pmsis.h"
