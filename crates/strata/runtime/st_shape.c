#include "st_shape.h"

static void st_move(void *dst, size_t d, const void *src, size_t s, int esize) {
    switch (esize) {
    case 8: ((uint64_t *)dst)[d] = ((const uint64_t *)src)[s]; break;
    case 4: ((uint32_t *)dst)[d] = ((const uint32_t *)src)[s]; break;
    default: ((uint8_t *)dst)[d] = ((const uint8_t *)src)[s]; break;
    }
}

void st_copy(void *args) {
    const st_copy_args *c = (const st_copy_args *)args;
    size_t n = 1;
    for (int k = 0; k < c->rank; k++) n *= (size_t)c->dims[k];
    size_t lo, hi;
    st_split(n, &lo, &hi);
    for (size_t o = lo; o < hi; o++) {
        long s = c->off, d = c->doff;
        size_t rem = o;
        for (int k = c->rank - 1; k >= 0; k--) {
            long i = (long)(rem % (size_t)c->dims[k]);
            rem /= (size_t)c->dims[k];
            s += i * c->ss[k];
            d += i * c->ds[k];
        }
        st_move(c->dst, (size_t)d, c->src, (size_t)s, c->esize);
    }
}

void st_gather(void *args) {
    const st_gather_args *g = (const st_gather_args *)args;
    size_t inner = (size_t)g->inner, ni = (size_t)g->nidx;
    size_t lo, hi;
    st_split((size_t)g->outer * ni * inner, &lo, &hi);
    for (size_t o = lo; o < hi; o++) {
        size_t i = o % inner, j = (o / inner) % ni, b = o / (inner * ni);
        int64_t v = g->idx[j];
        if (v < 0) v += g->d;
        if (v < 0 || v >= g->d) {
            st_fault(ST_FAULT_INDEX);
            memset((uint8_t *)g->y + o * (size_t)g->esize, 0, (size_t)g->esize);
            continue;
        }
        st_move(g->y, o, g->x, (b * (size_t)g->d + (size_t)v) * inner + i, g->esize);
    }
}

static int st_pad_src(int c, int n, int mode) {
    if (c >= 0 && c < n) return c;
    if (mode == 0) return -1;
    if (mode == 2) return c < 0 ? 0 : n - 1;
    if (n == 1) return 0;
    int period = 2 * (n - 1), m = c % period;
    if (m < 0) m += period;
    return m < n ? m : period - m;
}

void st_pad(void *args) {
    const st_pad_args *p = (const st_pad_args *)args;
    size_t n = 1;
    for (int k = 0; k < p->rank; k++) n *= (size_t)p->odims[k];
    size_t lo, hi;
    st_split(n, &lo, &hi);
    for (size_t o = lo; o < hi; o++) {
        size_t rem = o, off = 0;
        int inside = 1;
        for (int k = p->rank - 1; k >= 0; k--) {
            int c = (int)(rem % (size_t)p->odims[k]) - p->pb[k];
            rem /= (size_t)p->odims[k];
            int s = st_pad_src(c, p->idims[k], p->mode);
            if (s < 0) inside = 0;
            else off += (size_t)s * (size_t)p->istr[k];
        }
        p->y[o] = inside ? p->x[off] : p->value;
    }
}
