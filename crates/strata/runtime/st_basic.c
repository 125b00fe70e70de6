#include "st_basic.h"

void st_gemm(void *args) {
    const st_gemm_args *g = (const st_gemm_args *)args;
    size_t nb = 1;
    for (int d = 0; d < g->nbd; d++) nb *= (size_t)g->bdims[d];
    size_t mn = (size_t)g->m * (size_t)g->n;
    size_t lo, hi;
    st_split(nb * mn, &lo, &hi);
    for (size_t idx = lo; idx < hi; idx++) {
        size_t bi = idx / mn, r = idx % mn;
        size_t i = r / (size_t)g->n, j = r % (size_t)g->n;
        size_t oa = 0, ob = 0, oc = 0, rem = bi;
        for (int d = g->nbd - 1; d >= 0; d--) {
            size_t q = rem % (size_t)g->bdims[d];
            rem /= (size_t)g->bdims[d];
            oa += q * (size_t)g->sa[d];
            ob += q * (size_t)g->sb[d];
            oc += q * (size_t)g->sc[d];
        }
        float acc = 0.0f;
        for (size_t p = 0; p < (size_t)g->k; p++)
            acc += g->a[oa + i * (size_t)g->sam + p * (size_t)g->sak] *
                   g->b[ob + p * (size_t)g->sbk + j * (size_t)g->sbn];
        float v = g->alpha * acc;
        if (g->c)
            v += g->beta * g->c[oc + i * (size_t)g->scm + j * (size_t)g->scn];
        g->y[idx] = v;
    }
}

void st_relu(void *args) {
    const st_relu_args *a = (const st_relu_args *)args;
    size_t lo, hi;
    st_split((size_t)a->n, &lo, &hi);
    for (size_t i = lo; i < hi; i++)
        a->y[i] = a->x[i] > 0.0f ? a->x[i] : 0.0f;
}

void st_relu_grad(void *args) {
    const st_relu_grad_args *a = (const st_relu_grad_args *)args;
    size_t lo, hi;
    st_split((size_t)a->n, &lo, &hi);
    for (size_t i = lo; i < hi; i++)
        a->dx[i] = a->x[i] > 0.0f ? a->dy[i] : 0.0f;
}

void st_reduce(void *args) {
    const st_reduce_args *r = (const st_reduce_args *)args;
    size_t n_out = 1, n_red = 1;
    for (int i = 0; i < r->n_kept; i++) n_out *= (size_t)r->kept_dims[i];
    for (int i = 0; i < r->n_red; i++) n_red *= (size_t)r->red_dims[i];
    size_t lo, hi;
    st_split(n_out, &lo, &hi);
    for (size_t o = lo; o < hi; o++) {
        size_t base = 0, rem = o;
        for (int i = r->n_kept - 1; i >= 0; i--) {
            base += (rem % (size_t)r->kept_dims[i]) * (size_t)r->kept_strides[i];
            rem /= (size_t)r->kept_dims[i];
        }
        st_psum sum;
        st_psum_init(&sum);
        for (size_t q = 0; q < n_red; q++) {
            size_t off = base, rq = q;
            for (int i = r->n_red - 1; i >= 0; i--) {
                off += (rq % (size_t)r->red_dims[i]) * (size_t)r->red_strides[i];
                rq /= (size_t)r->red_dims[i];
            }
            st_psum_add(&sum, r->x[off]);
        }
        float acc = st_psum_total(&sum);
        r->y[o] = r->mean ? acc / (float)(r->div ? (size_t)r->div : n_red) : acc;
    }
}
