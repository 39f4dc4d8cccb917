/* StarPU baseline for bench/filters.py: the same filter pipeline, the same
 * events, the same cuts, written against StarPU with its `dm` scheduler
 * (earliest finish time from history-based performance models).
 *
 * Each filter of each event is one task; the tasks of an event access the
 * event's state in read-write mode, so StarPU's implicit data dependencies
 * run them in the written order. A task whose event was already rejected
 * returns at once (StarPU cannot cancel submitted tasks). Each filter has
 * its own codelet and history-based performance model.
 *
 * Input (written by bench/filters.py), little-endian:
 *   "EVFT" u32 version(1) u32 events u32 filters u32 columns
 *   per filter: u32 column, u32 op (0 >=, 1 >, 2 <=, 3 <, 4 ==, 5 !=),
 *               f64 threshold, f64 seconds, char name[32]
 *   f64 values[columns][events] (column-major)
 * Filters are listed in the written order.
 *
 * Output (stdout, one JSON line): events, accepted, per-filter executions
 * with work, wall seconds.
 *
 * Build: cc -O2 -o starpu_filters starpu_filters.c $(pkg-config --cflags --libs starpu-1.3)
 * Run:   STARPU_NCPU=2 STARPU_SCHED=dm ./starpu_filters input.bin
 */
#include <starpu.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_FILTERS 64

struct filter {
    uint32_t column, op;
    double threshold, seconds;
    char name[33];
    struct starpu_codelet cl;
    struct starpu_perfmodel model;
    uint64_t busy_iters;
};

static uint32_t n_events, n_filters, n_columns;
static double *values;
static struct filter filters[MAX_FILTERS];
static uint64_t executed[MAX_FILTERS]; /* tasks that did the work */
static uint64_t passed_count[MAX_FILTERS];
static starpu_pthread_mutex_t count_lock;

/* The same dependent xorshift chain as evflow's synthetic busy work. */
static uint64_t busy(uint64_t n) {
    volatile uint64_t sink;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    sink = x;
    return sink;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static double iterations_per_second(void) {
    const uint64_t n = 1 << 20;
    double best = 1e9;
    busy(n / 8);
    for (int r = 0; r < 7; r++) {
        double t0 = now();
        busy(n);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    return n / (best > 1e-9 ? best : 1e-9);
}

/* Per event state: [0] alive flag, [1] event index. */
static void filter_cpu(void *buffers[], void *arg) {
    struct filter *f = arg;
    uint64_t *state = (uint64_t *)STARPU_VARIABLE_GET_PTR(buffers[0]);
    if (!state[0]) return;
    uint32_t index = (uint32_t)state[1];
    double x = values[(size_t)f->column * n_events + index];
    busy(f->busy_iters);
    int pass;
    switch (f->op) {
    case 0: pass = x >= f->threshold; break;
    case 1: pass = x > f->threshold; break;
    case 2: pass = x <= f->threshold; break;
    case 3: pass = x < f->threshold; break;
    case 4: pass = x == f->threshold; break;
    default: pass = x != f->threshold; break;
    }
    if (!pass) state[0] = 0;
    int k = (int)(f - filters);
    starpu_pthread_mutex_lock(&count_lock);
    executed[k]++;
    if (pass) passed_count[k]++;
    starpu_pthread_mutex_unlock(&count_lock);
}

static int read_input(const char *path) {
    FILE *in = fopen(path, "rb");
    if (!in) { perror(path); return -1; }
    char magic[4];
    uint32_t version;
    if (fread(magic, 1, 4, in) != 4 || memcmp(magic, "EVFT", 4) != 0) goto bad;
    if (fread(&version, 4, 1, in) != 1 || version != 1) goto bad;
    if (fread(&n_events, 4, 1, in) != 1 || fread(&n_filters, 4, 1, in) != 1 ||
        fread(&n_columns, 4, 1, in) != 1) goto bad;
    if (n_filters > MAX_FILTERS) goto bad;
    for (uint32_t k = 0; k < n_filters; k++) {
        struct filter *f = &filters[k];
        if (fread(&f->column, 4, 1, in) != 1 || fread(&f->op, 4, 1, in) != 1 ||
            fread(&f->threshold, 8, 1, in) != 1 || fread(&f->seconds, 8, 1, in) != 1 ||
            fread(f->name, 1, 32, in) != 32) goto bad;
        f->name[32] = 0;
        if (f->column >= n_columns) goto bad;
    }
    size_t n = (size_t)n_events * n_columns;
    values = malloc(n * sizeof(double));
    if (!values || fread(values, sizeof(double), n, in) != n) goto bad;
    fclose(in);
    return 0;
bad:
    fprintf(stderr, "%s: malformed input\n", path);
    fclose(in);
    return -1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s input.bin\n", argv[0]);
        return 2;
    }
    if (read_input(argv[1]) != 0) return 1;
    double rate = iterations_per_second();
    /* Bound the tasks in flight, as evflow bounds events in flight. */
    setenv("STARPU_LIMIT_MAX_SUBMITTED_TASKS", "4096", 0);
    setenv("STARPU_LIMIT_MIN_SUBMITTED_TASKS", "3072", 0);
    setenv("STARPU_SCHED", "dm", 0);
    if (starpu_init(NULL) != 0) {
        fprintf(stderr, "starpu_init failed\n");
        return 1;
    }
    starpu_pthread_mutex_init(&count_lock, NULL);
    for (uint32_t k = 0; k < n_filters; k++) {
        struct filter *f = &filters[k];
        f->busy_iters = (uint64_t)(f->seconds * rate + 0.5);
        memset(&f->model, 0, sizeof f->model);
        f->model.type = STARPU_HISTORY_BASED;
        f->model.symbol = f->name;
        starpu_codelet_init(&f->cl);
        f->cl.cpu_funcs[0] = filter_cpu;
        f->cl.nbuffers = 1;
        f->cl.modes[0] = STARPU_RW;
        f->cl.model = &f->model;
        f->cl.name = f->name;
    }
    uint64_t *states = calloc((size_t)n_events * 2, sizeof(uint64_t));
    starpu_data_handle_t *handles = calloc(n_events, sizeof *handles);
    double t0 = now();
    for (uint32_t e = 0; e < n_events; e++) {
        states[2 * e] = 1;
        states[2 * e + 1] = e;
        starpu_variable_data_register(&handles[e], STARPU_MAIN_RAM, (uintptr_t)&states[2 * e],
                                      2 * sizeof(uint64_t));
        for (uint32_t k = 0; k < n_filters; k++) {
            struct starpu_task *task = starpu_task_create();
            task->cl = &filters[k].cl;
            task->handles[0] = handles[e];
            task->cl_arg = &filters[k];
            task->cl_arg_size = 0;
            if (starpu_task_submit(task) != 0) {
                fprintf(stderr, "task submission failed\n");
                return 1;
            }
        }
        starpu_data_unregister_submit(handles[e]);
    }
    starpu_task_wait_for_all();
    double wall = now() - t0;
    uint64_t accepted = 0;
    for (uint32_t e = 0; e < n_events; e++) accepted += states[2 * e] != 0;
    starpu_shutdown();
    printf("{\"events\": %u, \"accepted\": %llu, \"wall_s\": %.6f, \"filters\": [", n_events,
           (unsigned long long)accepted, wall);
    for (uint32_t k = 0; k < n_filters; k++)
        printf("%s{\"name\": \"%s\", \"executed\": %llu, \"passed\": %llu}", k ? ", " : "",
               filters[k].name, (unsigned long long)executed[k],
               (unsigned long long)passed_count[k]);
    printf("]}\n");
    free(states);
    free(handles);
    free(values);
    return 0;
}
