/* Gradient accumulation and the SGD update, both in place. */
#ifndef ST_TRAIN_H
#define ST_TRAIN_H
#include "strata_rt.h"

/* buf = (flag && *flag) ? val : buf + val */
typedef struct { float *buf; const float *val; const uint8_t *flag; int n; } st_accumulate_args;
void st_accumulate(void *args);

/* w -= lr * g */
typedef struct { float *w; const float *g; int n; float lr; } st_sgd_args;
void st_sgd(void *args);

#endif
