/* Ops of ONNX Runtime's gradient graphs: Expand (broadcast copy), Scale,
 * Sum of k tensors, FusedMatMul (MatMul with transposed operands). */
#ifndef ST_ORT_H
#define ST_ORT_H
#include "strata_rt.h"

/* y[o] = x[sum_d idx_d(o) * xs[d]] over an output of `rank` dims (xs[d] = 0
 * where x is broadcast). */
typedef struct { const float *x; float *y; int rank, dims[8], xs[8]; int n; } st_expand_args;
void st_expand(void *args);

/* y = x * f (f: the scale, or its inverse for scale_down) */
typedef struct { const float *x; float *y; int n; float f; } st_scale_args;
void st_scale(void *args);

/* y = ((x[0] + x[1]) + x[2]) + ... over k inputs of n elements. */
typedef struct { const float *x[8]; int k; float *y; int n; } st_sum_args;
void st_sum(void *args);

/* y[b,i,j] = alpha * sum_q a[oa(b) + i*am + q*ak] * b[ob(b) + q*bk + j*bn];
 * batch strides sa/sb as in st_matmul. Rows (b,i) are split over cores. */
typedef struct {
    const float *a, *b;
    float *y;
    int nbd, bdims[8], sa[8], sb[8];
    int m, n, k, am, ak, bk, bn;
    float alpha;
} st_fused_matmul_args;
void st_fused_matmul(void *args);

#endif
