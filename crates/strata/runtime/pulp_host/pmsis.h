/* strata's host implementation of the subset of the PULP SDK's PMSIS API
 * that strata_pulp.c uses, to run a --target pulp project on the build
 * machine and check it on the way. Declarations follow the SDK's, with one
 * deliberate difference: addresses the SDK passes as uint32_t (cluster DMA
 * ext/loc) are uintptr_t here, so they hold a 64-bit host pointer; on rv32
 * the two are the same type.
 *
 * What it checks (any violation prints "pmsis-host: step N: ..." naming
 * the step -- a running count of transfers, waits and checked accesses --
 * and the buffer or arena, and exits with status 6):
 *   - memories are separate regions: every pmsis_l1_malloc / pi_l2_malloc
 *     is its own malloc, L1 has 256 KiB in all, the RAM is its own space
 *     addressed by offsets (pi_ram_alloc);
 *   - cluster DMA and RAM copies are asynchronous: at issue the source
 *     bytes are captured and the destination filled with poison (0xFF);
 *     the data lands at the wait;
 *   - both sides of a transfer lie inside one allocation of the right
 *     memory (or a registered read-only constant, as a source only); a
 *     command carries 1 to 65,535 bytes (the SDK's 16-bit size field);
 *   - no command is reused while in flight, no wait is on a command that
 *     is not in flight, and none is in flight when a cluster task ends;
 *   - cluster services are called inside a cluster task, forks do not
 *     nest, and a barrier is not called inside a fork (the cores of a fork
 *     run one after another here). */
#ifndef PMSIS_HOST_H
#define PMSIS_HOST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PMSIS_HOST 1

/* Devices and configurations. */
struct pi_device {
    void *config;
    void *data;
};
void pi_open_from_conf(struct pi_device *device, void *conf);

/* Cluster. */
struct pi_cluster_conf {
    int id;
};
struct pi_cluster_task {
    void (*entry)(void *arg);
    void *arg;
    void *stacks;
    uint32_t stack_size;
    uint32_t slave_stack_size;
    int nb_cores;
};
void pi_cluster_conf_init(struct pi_cluster_conf *conf);
int pi_cluster_open(struct pi_device *device);
int pi_cluster_close(struct pi_device *device);
struct pi_cluster_task *pi_cluster_task(struct pi_cluster_task *task, void (*entry)(void *arg),
                                        void *arg);
int pi_cluster_send_task_to_cl(struct pi_device *device, struct pi_cluster_task *task);

/* Team. */
#define PI_HOST_CORES 8
void pi_cl_team_fork(int nb_cores, void (*entry)(void *), void *arg);
void pi_cl_team_barrier(void);
int pi_core_id(void);
int pi_cl_cluster_nb_cores(void);

/* Memory. */
void *pi_l2_malloc(int size);
void pi_l2_free(void *chunk, int size);
void *pmsis_l1_malloc(uint32_t size);
void pmsis_l1_malloc_free(void *chunk, uint32_t size);

/* Cluster DMA. */
typedef enum {
    PI_CL_DMA_DIR_LOC2EXT = 0,
    PI_CL_DMA_DIR_EXT2LOC = 1
} pi_cl_dma_dir_e;

/* An asynchronous copy (DMA command or RAM request); whether it is in
 * flight is kept by the host PMSIS, not in the struct (a fresh request is
 * uninitialised memory). */
typedef struct pi_host_copy_s {
    uint8_t *dst;      /* where the data lands: rows of `length` bytes ... */
    uint32_t stride;   /* ... `stride` apart */
    uint32_t length;
    uint32_t size;     /* bytes in all */
    uint8_t *data;     /* the source bytes, captured at issue */
    unsigned long step;
} pi_host_copy_t;

typedef struct pi_cl_dma_cmd_s {
    pi_host_copy_t copy;
} pi_cl_dma_cmd_t;

void pi_cl_dma_cmd(uintptr_t ext, uintptr_t loc, uint32_t size, pi_cl_dma_dir_e dir,
                   pi_cl_dma_cmd_t *cmd);
void pi_cl_dma_cmd_2d(uintptr_t ext, uintptr_t loc, uint32_t size, uint32_t stride,
                      uint32_t length, pi_cl_dma_dir_e dir, pi_cl_dma_cmd_t *cmd);
void pi_cl_dma_cmd_wait(pi_cl_dma_cmd_t *cmd);

/* Performance counters (here: processor time in clock() ticks). */
#define PI_PERF_CYCLES 0
void pi_perf_conf(unsigned events);
void pi_perf_cl_reset(void);
void pi_perf_cl_start(void);
void pi_perf_cl_stop(void);
unsigned int pi_perf_cl_read(int event);

/* RAM (bsp/ram.h, bsp/ram/hyperram.h). */
struct pi_hyperram_conf {
    int ram_size;
};
void pi_hyperram_conf_init(struct pi_hyperram_conf *conf);
int32_t pi_ram_open(struct pi_device *device);
void pi_ram_close(struct pi_device *device);
int pi_ram_alloc(struct pi_device *device, uint32_t *addr, uint32_t size);
int pi_ram_free(struct pi_device *device, uint32_t addr, uint32_t size);
void pi_ram_read(struct pi_device *device, uint32_t pi_ram_addr, void *data, uint32_t size);
void pi_ram_write(struct pi_device *device, uint32_t pi_ram_addr, void *data, uint32_t size);

typedef struct pi_cl_ram_req_s {
    pi_host_copy_t copy;
} pi_cl_ram_req_t;

void pi_cl_ram_copy(struct pi_device *device, uint32_t pi_ram_addr, void *addr, uint32_t size,
                    int ext2loc, pi_cl_ram_req_t *req);
void pi_cl_ram_copy_2d(struct pi_device *device, uint32_t pi_ram_addr, void *addr, uint32_t size,
                       uint32_t stride, uint32_t length, int ext2loc, pi_cl_ram_req_t *req);
void pi_cl_ram_copy_wait(pi_cl_ram_req_t *req);
void pi_cl_ram_read(struct pi_device *device, uint32_t pi_ram_addr, void *addr, uint32_t size,
                    pi_cl_ram_req_t *req);
void pi_cl_ram_write(struct pi_device *device, uint32_t pi_ram_addr, void *addr, uint32_t size,
                     pi_cl_ram_req_t *req);
void pi_cl_ram_read_wait(pi_cl_ram_req_t *req);
void pi_cl_ram_write_wait(pi_cl_ram_req_t *req);

/* Host-only extensions, for checked builds (ST_CHECKED). */
/* Stop the run: "pmsis-host: step N: <message>", exit status 6. */
void pi_host_fail(const char *fmt, ...);
/* Narrow the allocation holding p to [p, p + bytes) and name it for messages
 * (an arena inside a slightly larger block). */
void pi_host_name(const void *p, uint32_t bytes, const char *name);
/* Register a read-only constant a transfer may read. */
void pi_host_register_const(const void *p, uint32_t bytes, const char *name);
/* Check that [p, p + bytes) lies inside one allocation or constant; `what` says who asks. */
void pi_host_check_access(const void *p, uint32_t bytes, const char *what);
/* Fail when a copy is in flight: `what` ends with none. */
void pi_host_check_idle(const char *what);

#endif
