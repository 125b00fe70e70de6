/* strata's host implementation of its PMSIS subset: see pmsis.h for what it
 * models and checks. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pmsis.h"

/* L1 (the cluster's TCDM) in all. */
#define PI_HOST_L1_BYTES (256u * 1024u)
/* The largest cluster DMA command (the SDK's 16-bit size field). */
#define PI_HOST_CMD_MAX 65535u
/* Where RAM addresses start (0 is never a valid RAM address here). */
#define PI_HOST_RAM_BASE 0x1000u

enum { PI_HOST_L1 = 1, PI_HOST_L2 = 2, PI_HOST_CONST = 4, PI_HOST_RAM = 8 };

typedef struct {
    uint8_t *base;  /* host memory */
    uintptr_t addr; /* the address programs use: the host pointer, or a RAM address */
    uint32_t bytes;
    int kind;
    char name[80];
    uintptr_t block; /* the address the allocator returned */
    uint8_t *mem;    /* the host memory to free */
} pi_host_region_t;

static pi_host_region_t *regions;
static size_t n_regions, cap_regions;
static pi_host_copy_t **flight;
static size_t n_flight, cap_flight;
static unsigned long step;
static uint32_t l1_used;
static int cluster_open, in_task, in_fork, core, ram_open;
static uint32_t ram_next = PI_HOST_RAM_BASE;

void pi_host_fail(const char *fmt, ...) {
    va_list ap;
    printf("pmsis-host: step %lu: ", step);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    exit(6);
}

static const char *kind_name(int kind) {
    switch (kind) {
    case PI_HOST_L1: return "L1";
    case PI_HOST_L2: return "L2";
    case PI_HOST_CONST: return "read-only constant";
    default: return "RAM";
    }
}

static void add_region(uint8_t *base, uintptr_t addr, uint32_t bytes, int kind, const char *name) {
    pi_host_region_t *r;
    if (n_regions == cap_regions) {
        cap_regions = cap_regions ? 2 * cap_regions : 64;
        regions = (pi_host_region_t *)realloc(regions, cap_regions * sizeof *regions);
        if (!regions) pi_host_fail("out of host memory for the region table");
    }
    r = &regions[n_regions++];
    r->base = base;
    r->addr = addr;
    r->bytes = bytes;
    r->kind = kind;
    r->block = addr;
    r->mem = base;
    snprintf(r->name, sizeof r->name, "%s", name);
}

static pi_host_region_t *find_region(uintptr_t addr, int kinds) {
    size_t i;
    for (i = 0; i < n_regions; i++) {
        pi_host_region_t *r = &regions[i];
        if ((r->kind & kinds) && addr >= r->addr && addr - r->addr < r->bytes) return r;
    }
    return NULL;
}

static void remove_region(uintptr_t addr, int kind, const char *what) {
    size_t i;
    for (i = 0; i < n_regions; i++) {
        if (regions[i].kind == kind && (regions[i].addr == addr || (regions[i].block && regions[i].block == addr))) {
            regions[i] = regions[--n_regions];
            return;
        }
    }
    pi_host_fail("%s of %#lx, which is no %s allocation", what, (unsigned long)addr,
                 kind_name(kind));
}

static void kinds_text(int kinds, char *out, size_t n) {
    int k;
    out[0] = 0;
    for (k = 1; k <= PI_HOST_RAM; k <<= 1) {
        if (kinds & k) {
            if (out[0]) strncat(out, " or ", n - strlen(out) - 1);
            strncat(out, kind_name(k), n - strlen(out) - 1);
        }
    }
}

/* The host memory of [addr, addr + extent) when it lies inside one region
 * of the given kinds; otherwise stop the run, naming `side` and `what`. */
static uint8_t *checked(uintptr_t addr, uint64_t extent, int kinds, const char *side,
                        const char *what) {
    char k[64];
    pi_host_region_t *r = find_region(addr, kinds);
    if (r && (uint64_t)(addr - r->addr) + extent <= r->bytes) return r->base + (addr - r->addr);
    kinds_text(kinds, k, sizeof k);
    if (r) {
        pi_host_fail("%s: %s [%s + %lu, + %llu bytes) runs past %s (%lu bytes) by %llu bytes", what,
                     side, r->name, (unsigned long)(addr - r->addr), (unsigned long long)extent,
                     r->name, (unsigned long)r->bytes,
                     (unsigned long long)((addr - r->addr) + extent - r->bytes));
    }
    if ((r = find_region(addr, ~kinds)) != NULL) {
        pi_host_fail("%s: %s at %s + %lu lies in %s memory, expected %s", what, side, r->name,
                     (unsigned long)(addr - r->addr), kind_name(r->kind), k);
    }
    pi_host_fail("%s: %s at %#lx (%llu bytes) is inside no %s allocation", what, side,
                 (unsigned long)addr, (unsigned long long)extent, k);
    return NULL;
}

void pi_host_name(const void *p, uint32_t bytes, const char *name) {
    uintptr_t a = (uintptr_t)p;
    pi_host_region_t *r = find_region(a, PI_HOST_L1 | PI_HOST_L2 | PI_HOST_RAM);
    if (!r || (uint64_t)(a - r->addr) + bytes > r->bytes)
        pi_host_fail("pi_host_name(%s): [%#lx, + %lu bytes) is inside no allocation", name, (unsigned long)a, (unsigned long)bytes);
    r->base += a - r->addr;
    r->addr = a;
    r->bytes = bytes;
    snprintf(r->name, sizeof r->name, "%s", name);
}

void pi_host_register_const(const void *p, uint32_t bytes, const char *name) {
    if (!find_region((uintptr_t)p, PI_HOST_CONST))
        add_region((uint8_t *)(uintptr_t)p, (uintptr_t)p, bytes, PI_HOST_CONST, name);
}

void pi_host_check_access(const void *p, uint32_t bytes, const char *what) {
    step++;
    if (bytes) checked((uintptr_t)p, bytes, PI_HOST_L1 | PI_HOST_L2 | PI_HOST_CONST, "bytes", what);
}

void pi_host_check_idle(const char *what) {
    if (n_flight) {
        pi_host_fail("%s ends with %lu copies in flight (the oldest issued at step %lu: a missing wait)",
                     what, (unsigned long)n_flight, flight[0]->step);
    }
}

/* ---- Asynchronous copies ---- */

static void in_cluster(const char *what) {
    if (!in_task) pi_host_fail("%s called outside a cluster task", what);
}

/* Whether a copy is in flight: by the list, not by its fields, which a
 * fresh request on the stack holds as garbage. */
static size_t flying(const pi_host_copy_t *c) {
    size_t i;
    for (i = 0; i < n_flight; i++)
        if (flight[i] == c) return i + 1;
    return 0;
}

/* Issue a copy of size / length rows of `length` bytes, row r from
 * src + r * src_stride to dst + r * dst_stride: capture the source now,
 * poison the destination, land at the wait. */
static void issue(pi_host_copy_t *c, const char *what, const uint8_t *src, uint32_t src_stride,
                  uint8_t *dst, uint32_t dst_stride, uint32_t size, uint32_t length) {
    uint32_t r, rows = size / length;
    if (flying(c)) pi_host_fail("%s: its command is still in flight (issued at step %lu)", what, c->step);
    c->data = (uint8_t *)malloc(size);
    if (!c->data) pi_host_fail("%s: out of host memory", what);
    for (r = 0; r < rows; r++) memcpy(c->data + (size_t)r * length, src + (size_t)r * src_stride, length);
    for (r = 0; r < rows; r++) memset(dst + (size_t)r * dst_stride, 0xFF, length);
    c->dst = dst;
    c->stride = dst_stride;
    c->length = length;
    c->size = size;
    c->step = step;
    if (n_flight == cap_flight) {
        cap_flight = cap_flight ? 2 * cap_flight : 32;
        flight = (pi_host_copy_t **)realloc(flight, cap_flight * sizeof *flight);
        if (!flight) pi_host_fail("out of host memory for the copies in flight");
    }
    flight[n_flight++] = c;
}

static void land(pi_host_copy_t *c, const char *what) {
    uint32_t r, rows;
    size_t i = flying(c);
    step++;
    in_cluster(what);
    if (!i) pi_host_fail("%s on a command that is not in flight", what);
    rows = c->size / c->length;
    for (r = 0; r < rows; r++) memcpy(c->dst + (size_t)r * c->stride, c->data + (size_t)r * c->length, c->length);
    free(c->data);
    c->data = NULL;
    i--;
    memmove(flight + i, flight + i + 1, (n_flight - i - 1) * sizeof *flight);
    n_flight--;
}

static void shape_ok(const char *what, uint32_t size, uint32_t stride, uint32_t length, uint32_t max) {
    if (size == 0 || size > max) pi_host_fail("%s: %lu bytes; one command carries 1 to %lu", what, (unsigned long)size, (unsigned long)max);
    if (length == 0 || size % length) pi_host_fail("%s: %lu bytes are not whole lines of %lu bytes", what, (unsigned long)size, (unsigned long)length);
    /* Only a 2D command has a stride and a line length (a 1D one is a single line). */
    if (size != length && (stride > PI_HOST_CMD_MAX || length > PI_HOST_CMD_MAX)) pi_host_fail("%s: 2D stride %lu or length %lu over 16 bits", what, (unsigned long)stride, (unsigned long)length);
}

void pi_cl_dma_cmd_2d(uintptr_t ext, uintptr_t loc, uint32_t size, uint32_t stride,
                      uint32_t length, pi_cl_dma_dir_e dir, pi_cl_dma_cmd_t *cmd) {
    char what[96];
    uint8_t *e, *l;
    uint32_t rows;
    step++;
    snprintf(what, sizeof what, "cluster DMA %s of %lu bytes",
             dir == PI_CL_DMA_DIR_EXT2LOC ? "L2->L1" : "L1->L2", (unsigned long)size);
    in_cluster(what);
    shape_ok(what, size, stride, length, PI_HOST_CMD_MAX);
    rows = size / length;
    l = checked(loc, size, PI_HOST_L1, "the L1 side", what);
    e = checked(ext, (uint64_t)(rows - 1) * stride + length,
                dir == PI_CL_DMA_DIR_EXT2LOC ? PI_HOST_L2 | PI_HOST_CONST : PI_HOST_L2,
                "the L2 side", what);
    if (dir == PI_CL_DMA_DIR_EXT2LOC)
        issue(&cmd->copy, what, e, stride, l, length, size, length);
    else
        issue(&cmd->copy, what, l, length, e, stride, size, length);
}

void pi_cl_dma_cmd(uintptr_t ext, uintptr_t loc, uint32_t size, pi_cl_dma_dir_e dir,
                   pi_cl_dma_cmd_t *cmd) {
    pi_cl_dma_cmd_2d(ext, loc, size, size, size, dir, cmd);
}

void pi_cl_dma_cmd_wait(pi_cl_dma_cmd_t *cmd) { land(&cmd->copy, "pi_cl_dma_cmd_wait"); }

/* ---- RAM ---- */

void pi_hyperram_conf_init(struct pi_hyperram_conf *conf) { conf->ram_size = 64 << 20; }

int32_t pi_ram_open(struct pi_device *device) {
    if (!device->config) pi_host_fail("pi_ram_open without pi_open_from_conf");
    ram_open = 1;
    return 0;
}

void pi_ram_close(struct pi_device *device) {
    (void)device;
    ram_open = 0;
}

int pi_ram_alloc(struct pi_device *device, uint32_t *addr, uint32_t size) {
    struct pi_hyperram_conf *conf = (struct pi_hyperram_conf *)device->config;
    uint8_t *p;
    char name[48];
    if (!ram_open) pi_host_fail("pi_ram_alloc before pi_ram_open");
    if ((uint64_t)ram_next - PI_HOST_RAM_BASE + size > (uint64_t)conf->ram_size) return -1;
    p = (uint8_t *)malloc(size ? size : 1);
    if (!p) return -1;
    snprintf(name, sizeof name, "RAM allocation at %#lx", (unsigned long)ram_next);
    add_region(p, ram_next, size, PI_HOST_RAM, name);
    *addr = ram_next;
    ram_next += (size + 15u) & ~15u;
    return 0;
}

int pi_ram_free(struct pi_device *device, uint32_t addr, uint32_t size) {
    pi_host_region_t *r = find_region(addr, PI_HOST_RAM);
    (void)device;
    (void)size;
    if (!r || r->block != addr) pi_host_fail("pi_ram_free of %#lx, which is no RAM allocation", (unsigned long)addr);
    free(r->mem);
    remove_region(addr, PI_HOST_RAM, "pi_ram_free");
    return 0;
}

static void ram_blocking(uint32_t ram_addr, void *data, uint32_t size, int ext2loc, const char *what) {
    uint8_t *ram, *mem;
    step++;
    if (in_task) pi_host_fail("%s is the fabric controller's call; the cluster uses pi_cl_ram_*", what);
    if (!ram_open) pi_host_fail("%s before pi_ram_open", what);
    ram = checked(ram_addr, size, PI_HOST_RAM, "the RAM side", what);
    mem = checked((uintptr_t)data, size, ext2loc ? PI_HOST_L2 : PI_HOST_L2 | PI_HOST_CONST, "the L2 side", what);
    if (ext2loc) memcpy(mem, ram, size); else memcpy(ram, mem, size);
}

void pi_ram_read(struct pi_device *device, uint32_t pi_ram_addr, void *data, uint32_t size) {
    (void)device;
    ram_blocking(pi_ram_addr, data, size, 1, "pi_ram_read");
}

void pi_ram_write(struct pi_device *device, uint32_t pi_ram_addr, void *data, uint32_t size) {
    (void)device;
    ram_blocking(pi_ram_addr, data, size, 0, "pi_ram_write");
}

void pi_cl_ram_copy_2d(struct pi_device *device, uint32_t pi_ram_addr, void *addr, uint32_t size,
                       uint32_t stride, uint32_t length, int ext2loc, pi_cl_ram_req_t *req) {
    char what[96];
    uint8_t *ram, *mem;
    uint32_t rows;
    (void)device;
    step++;
    snprintf(what, sizeof what, "RAM copy %s of %lu bytes", ext2loc ? "L3->L2" : "L2->L3", (unsigned long)size);
    in_cluster(what);
    if (!ram_open) pi_host_fail("%s before pi_ram_open", what);
    shape_ok(what, size, stride, length, 0xffffffffu);
    rows = size / length;
    ram = checked(pi_ram_addr, (uint64_t)(rows - 1) * stride + length, PI_HOST_RAM, "the RAM side", what);
    mem = checked((uintptr_t)addr, size, ext2loc ? PI_HOST_L2 : PI_HOST_L2 | PI_HOST_CONST, "the L2 side", what);
    if (ext2loc)
        issue(&req->copy, what, ram, stride, mem, length, size, length);
    else
        issue(&req->copy, what, mem, length, ram, stride, size, length);
}

void pi_cl_ram_copy(struct pi_device *device, uint32_t pi_ram_addr, void *addr, uint32_t size,
                    int ext2loc, pi_cl_ram_req_t *req) {
    pi_cl_ram_copy_2d(device, pi_ram_addr, addr, size, size, size, ext2loc, req);
}

void pi_cl_ram_read(struct pi_device *device, uint32_t pi_ram_addr, void *addr, uint32_t size,
                    pi_cl_ram_req_t *req) {
    pi_cl_ram_copy(device, pi_ram_addr, addr, size, 1, req);
}

void pi_cl_ram_write(struct pi_device *device, uint32_t pi_ram_addr, void *addr, uint32_t size,
                     pi_cl_ram_req_t *req) {
    pi_cl_ram_copy(device, pi_ram_addr, addr, size, 0, req);
}

void pi_cl_ram_copy_wait(pi_cl_ram_req_t *req) { land(&req->copy, "pi_cl_ram_copy_wait"); }
void pi_cl_ram_read_wait(pi_cl_ram_req_t *req) { land(&req->copy, "pi_cl_ram_read_wait"); }
void pi_cl_ram_write_wait(pi_cl_ram_req_t *req) { land(&req->copy, "pi_cl_ram_write_wait"); }

/* ---- Devices, cluster, team ---- */

void pi_open_from_conf(struct pi_device *device, void *conf) {
    device->config = conf;
    device->data = NULL;
}

void pi_cluster_conf_init(struct pi_cluster_conf *conf) { conf->id = 0; }

int pi_cluster_open(struct pi_device *device) {
    if (!device->config) pi_host_fail("pi_cluster_open without pi_open_from_conf");
    cluster_open = 1;
    return 0;
}

int pi_cluster_close(struct pi_device *device) {
    (void)device;
    pi_host_check_idle("closing the cluster");
    cluster_open = 0;
    return 0;
}

struct pi_cluster_task *pi_cluster_task(struct pi_cluster_task *task, void (*entry)(void *arg),
                                        void *arg) {
    memset(task, 0, sizeof *task);
    task->entry = entry;
    task->arg = arg;
    return task;
}

int pi_cluster_send_task_to_cl(struct pi_device *device, struct pi_cluster_task *task) {
    (void)device;
    if (!cluster_open) pi_host_fail("pi_cluster_send_task_to_cl before pi_cluster_open");
    if (in_task) pi_host_fail("pi_cluster_send_task_to_cl from inside a cluster task");
    in_task = 1;
    core = 0;
    task->entry(task->arg);
    pi_host_check_idle("the cluster task");
    in_task = 0;
    return 0;
}

void pi_cl_team_fork(int nb_cores, void (*entry)(void *), void *arg) {
    int c;
    in_cluster("pi_cl_team_fork");
    if (in_fork) pi_host_fail("pi_cl_team_fork inside a fork");
    if (nb_cores == 0) nb_cores = PI_HOST_CORES;
    if (nb_cores < 0 || nb_cores > PI_HOST_CORES) pi_host_fail("pi_cl_team_fork on %d cores; the cluster has %d", nb_cores, PI_HOST_CORES);
    in_fork = nb_cores;
    for (c = 0; c < nb_cores; c++) {
        core = c;
        entry(arg);
    }
    core = 0;
    in_fork = 0;
}

void pi_cl_team_barrier(void) {
    in_cluster("pi_cl_team_barrier");
    if (in_fork > 1) pi_host_fail("pi_cl_team_barrier inside a fork: here the cores of a fork run one after another");
}

int pi_core_id(void) { return core; }
int pi_cl_cluster_nb_cores(void) { return PI_HOST_CORES; }

/* ---- Memory ---- */

void *pi_l2_malloc(int size) {
    uint8_t *p;
    if (size <= 0) return NULL;
    p = (uint8_t *)malloc((size_t)size);
    if (p) add_region(p, (uintptr_t)p, (uint32_t)size, PI_HOST_L2, "an L2 allocation");
    return p;
}

void pi_l2_free(void *chunk, int size) {
    (void)size;
    remove_region((uintptr_t)chunk, PI_HOST_L2, "pi_l2_free");
    free(chunk);
}

void *pmsis_l1_malloc(uint32_t size) {
    uint8_t *p;
    if (!cluster_open) pi_host_fail("pmsis_l1_malloc before pi_cluster_open");
    if (size == 0 || size > PI_HOST_L1_BYTES - l1_used) return NULL;
    p = (uint8_t *)malloc(size);
    if (p) {
        add_region(p, (uintptr_t)p, size, PI_HOST_L1, "an L1 allocation");
        l1_used += size;
    }
    return p;
}

void pmsis_l1_malloc_free(void *chunk, uint32_t size) {
    remove_region((uintptr_t)chunk, PI_HOST_L1, "pmsis_l1_malloc_free");
    l1_used -= size;
    free(chunk);
}

/* ---- Performance counters ---- */

static clock_t perf_t0, perf_elapsed;
static int perf_running;

void pi_perf_conf(unsigned events) { (void)events; }
void pi_perf_cl_reset(void) {
    perf_elapsed = 0;
    perf_t0 = clock();
}
void pi_perf_cl_start(void) {
    perf_t0 = clock();
    perf_running = 1;
}
void pi_perf_cl_stop(void) {
    if (perf_running) perf_elapsed += clock() - perf_t0;
    perf_running = 0;
}
unsigned int pi_perf_cl_read(int event) {
    (void)event;
    return (unsigned int)(perf_elapsed + (perf_running ? clock() - perf_t0 : 0));
}
