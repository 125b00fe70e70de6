/* Element-wise arithmetic with broadcasting, and unary maps. */
#ifndef ST_ELTWISE_H
#define ST_ELTWISE_H
#include "strata_rt.h"

/* y[o] = a[off_a(o)] (op) b[off_b(o)] over the row-major output of shape
 * dims[0..rank); sa/sb are the operands' strides broadcast to the output
 * (0 on a broadcast dimension). op: 0 add, 1 sub, 2 mul, 3 div, 4 powf. */
typedef struct {
    const float *a, *b;
    float *y;
    int op, rank, dims[8], sa[8], sb[8];
} st_binary_args;
void st_binary(void *args);

/* y[i] = f(x[i]). op: 0 sqrtf, 1 fabsf, 2 negation, 3 sign, 4 expf,
 * 5 logf, 6 sigmoid 1/(1+expf(-x)), 7 tanhf, 8 leaky relu (slope alpha). */
typedef struct { const float *x; float *y; int op, n; float alpha; } st_unary_args;
void st_unary(void *args);

/* Activation gradients from the forward output y. op 0: SigmoidGrad
 * dy*y*(1-y); 1: TanhGrad dy*(1-y*y); 2: LeakyReluGrad y>0 ? dy : alpha*dy. */
typedef struct { const float *dy, *y; float *dx; int n, op; float alpha; } st_act_grad_args;
void st_act_grad(void *args);

#endif
