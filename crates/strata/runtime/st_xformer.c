#include "st_xformer.h"

void st_matmul(void *args) {
    const st_matmul_args *g = (const st_matmul_args *)args;
    size_t nb = 1;
    for (int d = 0; d < g->nbd; d++) nb *= (size_t)g->bdims[d];
    size_t mn = (size_t)g->m * (size_t)g->n;
    size_t lo, hi;
    st_split(nb * mn, &lo, &hi);
    for (size_t idx = lo; idx < hi; idx++) {
        size_t bi = idx / mn, r = idx % mn;
        size_t i = r / (size_t)g->n, j = r % (size_t)g->n;
        size_t oa = 0, ob = 0, rem = bi;
        for (int d = g->nbd - 1; d >= 0; d--) {
            size_t q = rem % (size_t)g->bdims[d];
            rem /= (size_t)g->bdims[d];
            oa += q * (size_t)g->sa[d];
            ob += q * (size_t)g->sb[d];
        }
        const float *a = g->a + oa + i * (size_t)g->k;
        const float *b = g->b + ob + j;
        float acc = 0.0f;
        for (int p = 0; p < g->k; p++)
            acc += a[p] * b[(size_t)p * (size_t)g->n];
        g->y[idx] = acc;
    }
}

void st_softmax(void *args) {
    const st_softmax_args *s = (const st_softmax_args *)args;
    size_t lo, hi, st = (size_t)s->inner;
    st_split((size_t)s->outer * st, &lo, &hi);
    for (size_t r = lo; r < hi; r++) {
        size_t b = (r / st) * (size_t)s->n * st + r % st;
        float m = s->x[b];
        for (int j = 1; j < s->n; j++)
            if (s->x[b + j * st] > m) m = s->x[b + j * st];
        float sum = 0.0f;
        for (int j = 0; j < s->n; j++) {
            float e = expf(s->x[b + j * st] - m);
            s->y[b + j * st] = e;
            sum += e;
        }
        for (int j = 0; j < s->n; j++)
            s->y[b + j * st] /= sum;
    }
}

void st_softmax_grad(void *args) {
    const st_softmax_grad_args *s = (const st_softmax_grad_args *)args;
    size_t lo, hi, st = (size_t)s->inner;
    st_split((size_t)s->outer * st, &lo, &hi);
    for (size_t r = lo; r < hi; r++) {
        size_t b = (r / st) * (size_t)s->n * st + r % st;
        float dot = 0.0f;
        for (int j = 0; j < s->n; j++)
            dot += s->dy[b + j * st] * s->y[b + j * st];
        for (int j = 0; j < s->n; j++)
            s->dx[b + j * st] = s->y[b + j * st] * (s->dy[b + j * st] - dot);
    }
}

/* erf by the positive series 2/sqrt(pi) e^(-x^2) sum x^(2n+1) 2^n/(2n+1)!!;
 * the reference interpreter runs the same loop. */
static double st_erf64(double x) {
    double ax = fabs(x);
    if (ax >= 6.0) return x < 0.0 ? -1.0 : 1.0;
    double x2 = 2.0 * ax * ax, t = ax, sum = 0.0, n = 0.0;
    while (t > 1e-17 * sum || sum == 0.0) {
        sum += t;
        n += 1.0;
        t = t * x2 / (2.0 * n + 1.0);
        if (t == 0.0) break;
    }
    double r = 1.1283791670955126 * exp(-ax * ax) * sum;
    return x < 0.0 ? -r : r;
}

#define ST_SQRT_2_OVER_PI 0.7978845608028654
#define ST_INV_SQRT_2 0.7071067811865476
#define ST_INV_SQRT_2PI 0.3989422804014327
#define ST_GELU_C 0.044715

void st_gelu(void *args) {
    const st_gelu_args *g = (const st_gelu_args *)args;
    size_t lo, hi;
    st_split((size_t)g->n, &lo, &hi);
    for (size_t i = lo; i < hi; i++) {
        double x = (double)g->x[i], v;
        if (g->approx)
            v = 0.5 * x * (1.0 + tanh(ST_SQRT_2_OVER_PI * (x + ST_GELU_C * x * x * x)));
        else
            v = 0.5 * x * (1.0 + st_erf64(x * ST_INV_SQRT_2));
        g->y[i] = (float)v;
    }
}

void st_gelu_grad(void *args) {
    const st_gelu_grad_args *g = (const st_gelu_grad_args *)args;
    size_t lo, hi;
    st_split((size_t)g->n, &lo, &hi);
    for (size_t i = lo; i < hi; i++) {
        double x = (double)g->x[i], d;
        if (g->approx) {
            double u = ST_SQRT_2_OVER_PI * (x + ST_GELU_C * x * x * x);
            double t = tanh(u);
            d = 0.5 * (1.0 + t) +
                0.5 * x * (1.0 - t * t) * ST_SQRT_2_OVER_PI * (1.0 + 3.0 * ST_GELU_C * x * x);
        } else {
            d = 0.5 * (1.0 + st_erf64(x * ST_INV_SQRT_2)) + x * ST_INV_SQRT_2PI * exp(-0.5 * x * x);
        }
        g->dx[i] = (float)((double)g->dy[i] * d);
    }
}

void st_layernorm(void *args) {
    const st_layernorm_args *l = (const st_layernorm_args *)args;
    size_t lo, hi, d = (size_t)l->d;
    st_split((size_t)l->rows, &lo, &hi);
    for (size_t r = lo; r < hi; r++) {
        const float *x = l->x + r * d;
        st_psum sum, sq;
        st_psum_init(&sum);
        st_psum_init(&sq);
        for (size_t j = 0; j < d; j++) st_psum_add(&sum, x[j]);
        float mean = st_psum_total(&sum) / (float)d;
        for (size_t j = 0; j < d; j++) st_psum_add(&sq, (x[j] - mean) * (x[j] - mean));
        float inv = 1.0f / sqrtf(st_psum_total(&sq) / (float)d + l->eps);
        for (size_t j = 0; j < d; j++) {
            float v = (x[j] - mean) * inv * l->scale[j * (size_t)l->ss];
            if (l->bias) v += l->bias[j * (size_t)l->sb];
            l->y[r * d + j] = v;
        }
        if (l->mean) l->mean[r] = mean;
        if (l->inv_std) l->inv_std[r] = inv;
    }
}

void st_layernorm_grad_x(void *args) {
    const st_layernorm_grad_x_args *l = (const st_layernorm_grad_x_args *)args;
    size_t lo, hi, d = (size_t)l->d;
    st_split((size_t)l->rows, &lo, &hi);
    for (size_t r = lo; r < hi; r++) {
        const float *dy = l->dy + r * d, *x = l->x + r * d;
        float m = l->mean[r], iv = l->inv_std[r];
        st_psum sg, sgx;
        st_psum_init(&sg);
        st_psum_init(&sgx);
        for (size_t j = 0; j < d; j++) {
            float g = dy[j] * l->scale[j];
            st_psum_add(&sg, g);
            st_psum_add(&sgx, g * ((x[j] - m) * iv));
        }
        float mg = st_psum_total(&sg) / (float)d, mgx = st_psum_total(&sgx) / (float)d;
        for (size_t j = 0; j < d; j++) {
            float g = dy[j] * l->scale[j];
            float xh = (x[j] - m) * iv;
            l->dx[r * d + j] = iv * (g - mg - xh * mgx);
        }
    }
}

void st_layernorm_grad_w(void *args) {
    const st_layernorm_grad_w_args *l = (const st_layernorm_grad_w_args *)args;
    size_t lo, hi, d = (size_t)l->d;
    st_split(d, &lo, &hi);
    for (size_t j = lo; j < hi; j++) {
        st_psum s, b;
        st_psum_init(&s);
        st_psum_init(&b);
        for (size_t r = 0; r < (size_t)l->rows; r++) {
            float g = l->dy[r * d + j];
            st_psum_add(&s, g * ((l->x[r * d + j] - l->mean[r]) * l->inv_std[r]));
            st_psum_add(&b, g);
        }
        if (l->dscale) l->dscale[j] = st_psum_total(&s);
        if (l->dbias) l->dbias[j] = st_psum_total(&b);
    }
}
