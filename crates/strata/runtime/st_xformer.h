/* Transformer kernels: batched MatMul, Softmax and its gradient, GELU and
 * its gradient, LayerNormalization and its gradient. */
#ifndef ST_XFORMER_H
#define ST_XFORMER_H
#include "strata_rt.h"

/* y[b,i,j] = sum_p a[off_a(b) + i*k + p] * b[off_b(b) + p*n + j]; the batch
 * index b runs over bdims[0..nbd) and sa/sb are the operands' matrix
 * strides along the batch dims (0 where broadcast). */
typedef struct {
    const float *a, *b;
    float *y;
    int nbd, bdims[8], sa[8], sb[8];
    int m, n, k;
} st_matmul_args;
void st_matmul(void *args);

/* Softmax over rows: outer blocks of n elements spaced inner apart. */
typedef struct { const float *x; float *y; int outer, n, inner; } st_softmax_args;
void st_softmax(void *args);

/* dx = y * (dy - sum(dy * y)) per row. */
typedef struct { const float *dy, *y; float *dx; int outer, n, inner; } st_softmax_grad_args;
void st_softmax_grad(void *args);

/* approx: 0 exact (erf), 1 tanh. Computed in double, rounded once. */
typedef struct { const float *x; float *y; int n, approx; } st_gelu_args;
void st_gelu(void *args);

typedef struct { const float *dy, *x; float *dx; int n, approx; } st_gelu_grad_args;
void st_gelu_grad(void *args);

/* rows of d elements; scale/bias read at j*ss, j*sb (stride 1 or 0);
 * bias, mean and inv_std may be NULL. */
typedef struct {
    const float *x, *scale, *bias;
    float *y, *mean, *inv_std;
    int rows, d, ss, sb;
    float eps;
} st_layernorm_args;
void st_layernorm(void *args);

/* dX, split over rows. */
typedef struct {
    const float *dy, *x, *mean, *inv_std;
    int rows, d;
    const float *scale;
    float *dx;
} st_layernorm_grad_x_args;
void st_layernorm_grad_x(void *args);

/* dScale and dBias (either may be NULL), split over columns. */
typedef struct {
    const float *dy, *x, *mean, *inv_std;
    int rows, d;
    float *dscale, *dbias;
} st_layernorm_grad_w_args;
void st_layernorm_grad_w(void *args);

#endif
