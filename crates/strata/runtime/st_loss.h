/* Softmax cross-entropy and mean-squared-error losses and gradients. */
#ifndef ST_LOSS_H
#define ST_LOSS_H
#include "strata_rt.h"

/* reduction: 0 none, 1 sum, 2 mean. labels are int64 (or int32 when label_i32). */
typedef struct {
    const float *x;
    const void *labels;
    int label_i32;
    const float *weight;
    float *loss, *logp;
    int b, c, reduction;
    long long ignore_index;
} st_sce_loss_args;
void st_sce_loss(void *args);

typedef struct {
    const float *dy, *logp;
    const void *labels;
    int label_i32;
    const float *weight;
    float *dx;
    int b, c, reduction;
    long long ignore_index;
    /* A tile of rows: dy (reduction none), logp and dx hold rows row0.. of
     * the batch, labels (and the mean's denominator) all labels_n rows;
     * labels_n 0 is b (the whole node). */
    int row0, labels_n;
} st_sce_loss_grad_args;
void st_sce_loss_grad(void *args);

/* The loss of a split softmax cross-entropy: the sum of the b per-row
 * losses (divided by the batch's total weight for a mean). */
typedef struct {
    const float *per;
    const void *labels;
    int label_i32;
    const float *weight;
    float *loss;
    int b, c, reduction;
    long long ignore_index;
} st_sce_loss_reduce_args;
void st_sce_loss_reduce(void *args);

/* loss = sum (p - t)^2 / div over n elements; div 0 is n (a tile of a loss
 * cut across tiles divides by the whole node's count). */
typedef struct { const float *p, *t; float *loss; int n, div; } st_mse_loss_args;
void st_mse_loss(void *args);

typedef struct { const float *p, *t; float *dp; int n; float scale; } st_mse_loss_grad_args;
void st_mse_loss_grad(void *args);

#endif
