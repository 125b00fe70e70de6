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

/* y[i] = f(x[i]). op: 0 sqrtf. */
typedef struct { const float *x; float *y; int op, n; } st_unary_args;
void st_unary(void *args);

#endif
