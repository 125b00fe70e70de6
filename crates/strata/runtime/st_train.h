/* Gradient accumulation and the SGD and AdamW updates, all in place. */
#ifndef ST_TRAIN_H
#define ST_TRAIN_H
#include "strata_rt.h"

/* buf = (flag && *flag) ? val : buf + val */
typedef struct { float *buf; const float *val; const uint8_t *flag; int n; } st_accumulate_args;
void st_accumulate(void *args);

/* w -= lr * g */
typedef struct { float *w; const float *g; int n; float lr; } st_sgd_args;
void st_sgd(void *args);

/* ONNX Runtime's AdamW on one parameter, in place on w, m1, m2 (see
 * ops/train.rs: AdamW). step: the 1-based optimizer step. mode 0: PyTorch,
 * 1: Hugging Face. */
typedef struct {
    float *w;
    const float *g;
    float *m1, *m2;
    const float *lr;
    const int64_t *step;
    int n;
    float alpha, beta, epsilon, weight_decay;
    int mode, correct_bias;
} st_adamw_args;
void st_adamw(void *args);

/* step[0] += 1 (core 0). */
typedef struct { int64_t *step; } st_step_count_args;
void st_step_count(void *args);

#endif
