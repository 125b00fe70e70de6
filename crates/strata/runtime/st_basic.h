/* Gemm, Relu, ReluGrad and the generic reduction. */
#ifndef ST_BASIC_H
#define ST_BASIC_H
#include "strata_rt.h"

/* y[i,j] = alpha * sum_p a[i*sam + p*sak] * b[p*sbk + j*sbn] + beta * c[i*scm + j*scn],
 * per batch: nbd batch dims bdims, each operand's matrix offset sum_d q_d * s?[d]
 * (0 where it broadcasts; nbd = 0 is plain 2-D Gemm). */
typedef struct {
    const float *a, *b, *c;
    float *y;
    int m, n, k, sam, sak, sbk, sbn, scm, scn;
    float alpha, beta;
    int nbd, bdims[8], sa[8], sb[8], sc[8];
} st_gemm_args;
void st_gemm(void *args);

typedef struct { const float *x; float *y; int n; } st_relu_args;
void st_relu(void *args);

typedef struct { const float *dy, *x; float *dx; int n; } st_relu_grad_args;
void st_relu_grad(void *args);

/* y[o] = sum (or mean) over the reduced axes; dims/strides describe the input.
 * A mean divides by div when it is not 0 (a tile of a reduction cut across
 * tiles divides by the whole node's count), else by the reduced count. */
typedef struct {
    const float *x;
    float *y;
    int n_kept, kept_dims[8], kept_strides[8];
    int n_red, red_dims[8], red_strides[8];
    int mean, div;
} st_reduce_args;
void st_reduce(void *args);

#endif
