"""The C source of the GPU emulator's instrumentation runtime (race check and memory
profile); :mod:`workbench.codegen.gpu_instrument` registers it and reads its results.

Each function a kernel calls is registered with its own definition, after a *prelude*
(types, the one global state record, prototypes of the internal functions) that an
include guard keeps to one copy per translation unit. ``wb_gpu_kernel_begin``'s source
also carries the internal functions and the exported functions Python calls, so every
unit that calls the runtime must call ``wb_gpu_kernel_begin`` (each launch does).
"""

from __future__ import annotations

__all__ = ["HEADERS", "PRELUDE", "SOURCES", "runtime_source"]

#: Headers the runtime needs.
HEADERS = ("stdint.h", "stdlib.h", "string.h")

PRELUDE = r"""
#ifndef WB_GPU_RUNTIME_PRELUDE
#define WB_GPU_RUNTIME_PRELUDE
/* Instrumentation runtime of the GPU emulator: mode 1 checks races, mode 2 profiles
   memory accesses. Blocks run one after another when instrumented, so the state is
   one global record and nothing is locked. */
enum { WB_GPU_OFF = 0, WB_GPU_RACE = 1, WB_GPU_PROFILE = 2 };
enum { WB_GPU_RAW = 1, WB_GPU_WAR = 2, WB_GPU_WAW = 3 };
/* one access of a shadow cell: segment (1 + barrier intervals since the launch began,
   0 = none), thread of the block, statement */
typedef struct { uint32_t seg; uint16_t thread, stmt; } wb_gpu_acc;
/* last write and up to two readers, of distinct threads, since then */
typedef struct { wb_gpu_acc w, r1, r2; } wb_gpu_cell;
/* live: cap once the shadow was cleared in this launch, else 0 */
typedef struct { wb_gpu_cell* cells; int64_t cap; uint64_t live; } wb_gpu_shadow;
/* one lane's access, valid in the warp whose stamp it carries */
typedef struct { int64_t addr; int32_t nbytes; uint32_t stamp; } wb_gpu_lane;
/* one warp-level access: the k-th access of a statement by each lane */
typedef struct { uint32_t k; int32_t stmt, buffer, space, is_write; } wb_gpu_group;
typedef struct { uint32_t stamp, n; } wb_gpu_count;  /* accesses of a statement so far */
/* profile row: kernel, stmt, buffer, space, is_write | requests, lanes, bytes, units
   (sectors or wavefronts), ideal units */
#define WB_GPU_ROW 10
#define WB_GPU_PAD 4
#define WB_GPU_KERNEL_FIELDS 8
#define WB_GPU_RACE_FIELDS 20
static struct {
  int32_t mode, stop, error, kernel_id, has_race;
  int64_t error_info[3], launches, off_launches;  /* launches in this mode / while off */
  int64_t grid[3], bdim[3], nthreads, block;
  uint32_t seg, block_seg;
  /* nlive: nshadow while checking races in a block (else 0: every access goes slow) */
  wb_gpu_shadow* shadow; int32_t nshadow; uint32_t nlive;
  int64_t* log; int64_t nlog, caplog;   /* (first segment, block) per block of the launch */
  int64_t race[WB_GPU_RACE_FIELDS];
  /* profile: the groups of the warp whose lanes run now; the running lane's accesses of
     each statement so far (valid where stamp = tstamp), and the next group it expects */
  wb_gpu_count* counts; int32_t count_stmts;
  uint32_t tstamp; int64_t cur_thread, cur_warp; int32_t pos, first_lane;
  wb_gpu_group* groups; int32_t ngroups, capgroups;
  /* lane j's access of group i: lanes[j * (capgroups + WB_GPU_PAD) + i] (rows not 4 KiB
     apart: they would share cache sets) */
  wb_gpu_lane* lanes; uint32_t wstamp;
  int64_t* rows; int32_t nrows, caprows, last_row;
  int64_t* kernels; int32_t nkernels;   /* per kernel id: launches, blocks, grid, block */
} wb_gpu_g;
static int32_t wb_gpu_fail(int32_t code, int64_t a, int64_t b, int64_t c);
static int32_t wb_gpu_access_slow(int32_t buffer_id, int32_t space, int32_t is_write,
                                  int64_t flat_index, int64_t byte_address, int32_t nbytes,
                                  int32_t thread, int32_t stmt);
static int32_t wb_gpu_race_found(int32_t kind, wb_gpu_acc prev, int32_t buffer_id,
                                 int32_t space, int64_t index, int32_t thread, int32_t stmt);
static int32_t wb_gpu_profile_access(int32_t buffer_id, int32_t space, int32_t is_write,
                                     int64_t address, int32_t nbytes, int32_t thread,
                                     int32_t stmt);
static void wb_gpu_profile_flush(void);
static int32_t wb_gpu_groups_grow(void);
static inline int32_t wb_gpu_race_cell(wb_gpu_cell* c, int32_t buffer_id, int32_t space,
                                       int32_t is_write, int64_t index, int32_t thread,
                                       int32_t stmt);

#endif
"""

_GPU_ACCESS = r"""
/* inlined into each access site: the race check's path is a few compares */
static inline __attribute__((always_inline)) int32_t wb_gpu_access(
    int32_t buffer_id, int32_t space, int32_t is_write, int64_t flat_index,
    int64_t byte_address, int32_t nbytes, int32_t thread_linear, int32_t stmt_id);
static int32_t wb_gpu_access(int32_t buffer_id, int32_t space, int32_t is_write,
                             int64_t flat_index, int64_t byte_address, int32_t nbytes,
                             int32_t thread_linear, int32_t stmt_id) {
  if (__builtin_expect((uint32_t)buffer_id < wb_gpu_g.nlive, 1)) {
    wb_gpu_shadow* sh = &wb_gpu_g.shadow[buffer_id];
    if (__builtin_expect((uint64_t)flat_index < sh->live && (uint32_t)stmt_id <= 0xFFFFu &&
                         (uint32_t)space <= 1u, 1))
      return wb_gpu_race_cell(&sh->cells[flat_index], buffer_id, space, is_write,
                              flat_index, thread_linear, stmt_id);
  }
  return wb_gpu_access_slow(buffer_id, space, is_write, flat_index, byte_address, nbytes,
                            thread_linear, stmt_id);
}
"""

_GPU_BLOCK_BEGIN = r"""
static int32_t wb_gpu_block_begin(int64_t block_linear) {
  if (wb_gpu_g.mode == WB_GPU_OFF || wb_gpu_g.stop) return wb_gpu_g.stop;
  if (wb_gpu_g.mode == WB_GPU_PROFILE) {
    wb_gpu_profile_flush();
    if (wb_gpu_g.kernel_id >= 0 && wb_gpu_g.kernel_id < wb_gpu_g.nkernels)
      wb_gpu_g.kernels[(int64_t)wb_gpu_g.kernel_id * WB_GPU_KERNEL_FIELDS + 1] += 1;
    return 0;
  }
  if (wb_gpu_g.seg == 0xFFFFFFFEu) return wb_gpu_fail(8, wb_gpu_g.kernel_id, 0, 0);
  wb_gpu_g.block_seg = ++wb_gpu_g.seg;
  wb_gpu_g.block = block_linear;
  wb_gpu_g.nlive = (uint32_t)wb_gpu_g.nshadow;
  if (wb_gpu_g.nlog == wb_gpu_g.caplog) {
    int64_t cap = wb_gpu_g.caplog ? 2 * wb_gpu_g.caplog : 256;
    int64_t* log = (int64_t*)realloc(wb_gpu_g.log, (size_t)cap * 2 * sizeof(int64_t));
    if (!log) return wb_gpu_fail(1, cap, 0, 0);
    wb_gpu_g.log = log; wb_gpu_g.caplog = cap;
  }
  wb_gpu_g.log[2 * wb_gpu_g.nlog] = wb_gpu_g.seg;
  wb_gpu_g.log[2 * wb_gpu_g.nlog + 1] = block_linear;
  wb_gpu_g.nlog++;
  return 0;
}
"""

_GPU_KERNEL_BEGIN = r"""
static int32_t wb_gpu_kernel_begin(int32_t kernel_id, int64_t grid_x, int64_t grid_y,
                                   int64_t grid_z, int64_t block_x, int64_t block_y,
                                   int64_t block_z) {
  if (wb_gpu_g.mode == WB_GPU_OFF) { wb_gpu_g.off_launches++; return 0; }
  if (wb_gpu_g.stop) return wb_gpu_g.stop;
  wb_gpu_g.launches++;
  int64_t nthreads = block_x * block_y * block_z;
  if (kernel_id < 0 || kernel_id > 65535) return wb_gpu_fail(5, kernel_id, 0, 0);
  if (block_x < 1 || block_y < 1 || block_z < 1 || nthreads > 65536)
    return wb_gpu_fail(3, nthreads, 65536, 0);
  wb_gpu_g.kernel_id = kernel_id;
  wb_gpu_g.grid[0] = grid_x; wb_gpu_g.grid[1] = grid_y; wb_gpu_g.grid[2] = grid_z;
  wb_gpu_g.bdim[0] = block_x; wb_gpu_g.bdim[1] = block_y; wb_gpu_g.bdim[2] = block_z;
  wb_gpu_g.nthreads = nthreads;
  wb_gpu_g.block = -1;
  if (wb_gpu_g.mode == WB_GPU_RACE) {
    for (int32_t i = 0; i < wb_gpu_g.nshadow; ++i) wb_gpu_g.shadow[i].live = 0;
    wb_gpu_g.nlive = 0;  /* until the first block begins */
    wb_gpu_g.seg = 0; wb_gpu_g.block_seg = 0; wb_gpu_g.nlog = 0;
    return 0;
  }
  /* profile */
  wb_gpu_profile_flush();
  if (kernel_id >= wb_gpu_g.nkernels) {
    int32_t n = kernel_id + 1;
    int64_t* k = (int64_t*)realloc(wb_gpu_g.kernels,
                                   (size_t)n * WB_GPU_KERNEL_FIELDS * sizeof(int64_t));
    if (!k) return wb_gpu_fail(1, n, 0, 0);
    memset(k + (int64_t)wb_gpu_g.nkernels * WB_GPU_KERNEL_FIELDS, 0,
           (size_t)(n - wb_gpu_g.nkernels) * WB_GPU_KERNEL_FIELDS * sizeof(int64_t));
    wb_gpu_g.kernels = k; wb_gpu_g.nkernels = n;
  }
  int64_t* k = wb_gpu_g.kernels + (int64_t)kernel_id * WB_GPU_KERNEL_FIELDS;
  k[0] += 1;
  for (int d = 0; d < 3; ++d) { k[2 + d] = wb_gpu_g.grid[d]; k[5 + d] = wb_gpu_g.bdim[d]; }
  return 0;
}

static int32_t wb_gpu_fail(int32_t code, int64_t a, int64_t b, int64_t c) {
  if (!wb_gpu_g.stop) {
    wb_gpu_g.error = code;
    wb_gpu_g.error_info[0] = a; wb_gpu_g.error_info[1] = b; wb_gpu_g.error_info[2] = c;
    wb_gpu_g.stop = 2;
    wb_gpu_g.nlive = 0;
  }
  return wb_gpu_g.stop;
}

/* An access the inlined path does not take: another mode, a stopped check, before a
   block, a buffer's first access in this launch (its shadow is cleared) or beyond its
   shadow (grown), or an id out of range. */
static int32_t wb_gpu_access_slow(int32_t buffer_id, int32_t space, int32_t is_write,
                                  int64_t index, int64_t byte_address, int32_t nbytes,
                                  int32_t thread, int32_t stmt) {
  if (wb_gpu_g.mode == WB_GPU_PROFILE)
    return wb_gpu_profile_access(buffer_id, space, is_write, byte_address, nbytes, thread,
                                 stmt);
  if (wb_gpu_g.mode != WB_GPU_RACE || wb_gpu_g.stop) return wb_gpu_g.stop;
  if ((uint32_t)space > 1u) return 0;
  if (wb_gpu_g.block_seg == 0) return wb_gpu_fail(6, buffer_id, 0, 0);
  if (buffer_id < 0 || buffer_id > 65535) return wb_gpu_fail(5, buffer_id, 0, 0);
  if (thread < 0 || thread >= wb_gpu_g.nthreads)
    return wb_gpu_fail(3, thread, wb_gpu_g.nthreads, 1);
  if (stmt < 0 || stmt > 65535) return wb_gpu_fail(4, stmt, 0, 0);
  if (index < 0) return wb_gpu_fail(2, buffer_id, index, 0);
  if (buffer_id >= wb_gpu_g.nshadow) {
    int32_t n = buffer_id + 1;
    wb_gpu_shadow* s = (wb_gpu_shadow*)realloc(wb_gpu_g.shadow, (size_t)n * sizeof(*s));
    if (!s) return wb_gpu_fail(1, n, 0, 0);
    memset(s + wb_gpu_g.nshadow, 0, (size_t)(n - wb_gpu_g.nshadow) * sizeof(*s));
    wb_gpu_g.shadow = s; wb_gpu_g.nshadow = n; wb_gpu_g.nlive = (uint32_t)n;
  }
  wb_gpu_shadow* sh = &wb_gpu_g.shadow[buffer_id];
  if (!sh->live) {  /* first access in this launch: forget the last one */
    if (sh->cap) memset(sh->cells, 0, (size_t)sh->cap * sizeof(wb_gpu_cell));
    sh->live = (uint64_t)sh->cap;
  }
  if (index >= sh->cap) {
    int64_t cap = sh->cap ? 2 * sh->cap : 1024;
    if (cap <= index) cap = index + 1;
    wb_gpu_cell* cells = (wb_gpu_cell*)realloc(sh->cells, (size_t)cap * sizeof(wb_gpu_cell));
    if (!cells) return wb_gpu_fail(1, buffer_id, cap, 0);
    memset(cells + sh->cap, 0, (size_t)(cap - sh->cap) * sizeof(wb_gpu_cell));
    sh->cells = cells; sh->cap = cap; sh->live = (uint64_t)cap;
  }
  return wb_gpu_race_cell(&sh->cells[index], buffer_id, space, is_write, index, thread, stmt);
}

static int64_t wb_gpu_block_of(uint32_t seg) {  /* the block a segment of this launch ran in */
  int64_t lo = 0, hi = wb_gpu_g.nlog - 1;
  while (lo < hi) {
    int64_t mid = (lo + hi + 1) / 2;
    if ((uint32_t)wb_gpu_g.log[2 * mid] <= seg) lo = mid; else hi = mid - 1;
  }
  return wb_gpu_g.nlog ? wb_gpu_g.log[2 * lo + 1] : -1;
}

static int32_t wb_gpu_race_found(int32_t kind, wb_gpu_acc prev, int32_t buffer_id,
                                 int32_t space, int64_t index, int32_t thread, int32_t stmt) {
  int64_t* r = wb_gpu_g.race;
  r[0] = kind; r[1] = wb_gpu_g.kernel_id; r[2] = buffer_id; r[3] = space; r[4] = index;
  for (int d = 0; d < 3; ++d) { r[5 + d] = wb_gpu_g.grid[d]; r[8 + d] = wb_gpu_g.bdim[d]; }
  r[11] = prev.seg >= wb_gpu_g.block_seg ? wb_gpu_g.block : wb_gpu_block_of(prev.seg);
  r[12] = prev.thread; r[13] = prev.stmt; r[14] = kind != WB_GPU_WAR;
  r[15] = wb_gpu_g.block; r[16] = thread; r[17] = stmt; r[18] = kind != WB_GPU_RAW;
  r[19] = prev.seg == wb_gpu_g.seg;  /* same barrier interval (else: another block) */
  wb_gpu_g.has_race = 1;
  wb_gpu_g.stop = 1;
  wb_gpu_g.nlive = 0;
  return 1;
}

/* -- profile -- */
/* The lanes of a warp run one after another (the emulator's thread loops: x innermost,
   so linear ids rise). A warp's groups are made by its first lane, in the order of its
   accesses; each later lane expects its i-th access in the i-th group and looks further
   (same statement, same count of accesses of it) where control flow diverged. */
static int32_t wb_gpu_profile_access(int32_t buffer_id, int32_t space, int32_t is_write,
                                     int64_t address, int32_t nbytes, int32_t thread,
                                     int32_t stmt) {
  if (wb_gpu_g.stop) return wb_gpu_g.stop;
  if ((uint32_t)space > 1u) return 0;
  if (thread != wb_gpu_g.cur_thread) {
    if (wb_gpu_g.nthreads <= 0) return wb_gpu_fail(6, buffer_id, 0, 0);
    if (thread < 0 || thread >= wb_gpu_g.nthreads)
      return wb_gpu_fail(3, thread, wb_gpu_g.nthreads, 1);
    wb_gpu_g.first_lane = (thread >> 5) != wb_gpu_g.cur_warp;  /* makes the groups */
    if (wb_gpu_g.first_lane) {
      wb_gpu_profile_flush();
      wb_gpu_g.cur_warp = thread >> 5;
    }
    wb_gpu_g.cur_thread = thread;
    wb_gpu_g.pos = 0;
    if (++wb_gpu_g.tstamp == 0) {  /* wrapped: make every counter stale */
      if (wb_gpu_g.counts)
        memset(wb_gpu_g.counts, 0, (size_t)wb_gpu_g.count_stmts * sizeof(wb_gpu_count));
      wb_gpu_g.tstamp = 1;
    }
  }
  if ((uint32_t)stmt >= (uint32_t)wb_gpu_g.count_stmts) {
    if (stmt < 0 || stmt > 65535) return wb_gpu_fail(4, stmt, 0, 0);
    int32_t n = stmt + 64;
    wb_gpu_count* c = (wb_gpu_count*)realloc(wb_gpu_g.counts, (size_t)n * sizeof(*c));
    if (!c) return wb_gpu_fail(1, n, 0, 0);
    memset(c + wb_gpu_g.count_stmts, 0, (size_t)(n - wb_gpu_g.count_stmts) * sizeof(*c));
    wb_gpu_g.counts = c; wb_gpu_g.count_stmts = n;
  }
  if (buffer_id < 0 || buffer_id > 65535) return wb_gpu_fail(5, buffer_id, 0, 0);
  if (nbytes < 1 || nbytes > 64) return wb_gpu_fail(7, nbytes, 0, 0);
  if (address < 0) return wb_gpu_fail(2, buffer_id, address, 1);
  wb_gpu_count* c = &wb_gpu_g.counts[stmt];
  if (c->stamp != wb_gpu_g.tstamp) { c->stamp = wb_gpu_g.tstamp; c->n = 0; }
  const uint32_t k = c->n++;
  int32_t i = wb_gpu_g.pos;
  const wb_gpu_group* g = i < wb_gpu_g.ngroups ? &wb_gpu_g.groups[i] : NULL;
  if (!g || g->stmt != stmt || g->k != k) {
    i = wb_gpu_g.ngroups;
    if (!wb_gpu_g.first_lane)  /* diverged: look for it */
      for (i = 0; i < wb_gpu_g.ngroups; ++i)
        if (wb_gpu_g.groups[i].stmt == stmt && wb_gpu_g.groups[i].k == k) break;
    if (i == wb_gpu_g.ngroups) {  /* a new warp-level access */
      if (wb_gpu_g.ngroups == wb_gpu_g.capgroups && wb_gpu_groups_grow()) return wb_gpu_g.stop;
      wb_gpu_group* n = &wb_gpu_g.groups[wb_gpu_g.ngroups++];
      n->k = k; n->stmt = stmt; n->buffer = buffer_id; n->space = space;
      n->is_write = is_write != 0;
    }
  }
  wb_gpu_g.pos = i + 1;
  wb_gpu_lane* l =
      &wb_gpu_g.lanes[(int64_t)(thread & 31) * (wb_gpu_g.capgroups + WB_GPU_PAD) + i];
  l->addr = address; l->nbytes = nbytes; l->stamp = wb_gpu_g.wstamp;
  return 0;
}

static int32_t wb_gpu_groups_grow(void) {  /* room for twice the groups */
  int32_t old = wb_gpu_g.capgroups, cap = old ? 2 * old : 256;
  wb_gpu_group* gs = (wb_gpu_group*)realloc(wb_gpu_g.groups, (size_t)cap * sizeof(*gs));
  if (!gs) return wb_gpu_fail(1, cap, 0, 0);
  wb_gpu_g.groups = gs;
  wb_gpu_lane* lanes =
      (wb_gpu_lane*)calloc((size_t)(cap + WB_GPU_PAD) * 32, sizeof(wb_gpu_lane));
  if (!lanes) return wb_gpu_fail(1, cap, 32, 0);
  for (int j = 0; j < 32 && old; ++j)
    memcpy(lanes + (int64_t)j * (cap + WB_GPU_PAD),
           wb_gpu_g.lanes + (int64_t)j * (old + WB_GPU_PAD), (size_t)old * sizeof(wb_gpu_lane));
  free(wb_gpu_g.lanes);
  wb_gpu_g.lanes = lanes; wb_gpu_g.capgroups = cap;
  return 0;
}

static void wb_gpu_sort(int64_t* v, int n) {  /* insertion sort: short, nearly sorted */
  for (int i = 1; i < n; ++i) {
    int64_t x = v[i]; int j = i - 1;
    while (j >= 0 && v[j] > x) { v[j + 1] = v[j]; --j; }
    v[j + 1] = x;
  }
}

/* A set of at most 544 integers for one evaluation: open addressing, emptied by a new
   stamp. Returns whether x was new. */
#define WB_GPU_SET 2048
static struct { int64_t key[WB_GPU_SET]; uint32_t stamp[WB_GPU_SET]; uint32_t now; } wb_gpu_set;
static void wb_gpu_set_clear(void) {
  if (++wb_gpu_set.now == 0) {
    memset(wb_gpu_set.stamp, 0, sizeof wb_gpu_set.stamp);
    wb_gpu_set.now = 1;
  }
}
static int wb_gpu_set_add(int64_t x) {
  uint32_t h = (uint32_t)(((uint64_t)x * 0x9E3779B97F4A7C15ull) >> 53);  /* 11 bits */
  for (;; h = (h + 1) & (WB_GPU_SET - 1)) {
    if (wb_gpu_set.stamp[h] != wb_gpu_set.now) {
      wb_gpu_set.stamp[h] = wb_gpu_set.now; wb_gpu_set.key[h] = x;
      return 1;
    }
    if (wb_gpu_set.key[h] == x) return 0;
  }
}

static int64_t* wb_gpu_row(const wb_gpu_group* g) {
  const int64_t key[5] = {wb_gpu_g.kernel_id, g->stmt, g->buffer, g->space, g->is_write};
  int32_t i = wb_gpu_g.last_row;
  if (i < wb_gpu_g.nrows && memcmp(wb_gpu_g.rows + (int64_t)i * WB_GPU_ROW, key, sizeof key) == 0)
    return wb_gpu_g.rows + (int64_t)i * WB_GPU_ROW;
  for (i = 0; i < wb_gpu_g.nrows; ++i)
    if (memcmp(wb_gpu_g.rows + (int64_t)i * WB_GPU_ROW, key, sizeof key) == 0) break;
  if (i == wb_gpu_g.nrows) {
    if (wb_gpu_g.nrows == wb_gpu_g.caprows) {
      int32_t cap = wb_gpu_g.caprows ? 2 * wb_gpu_g.caprows : 64;
      int64_t* rows = (int64_t*)realloc(wb_gpu_g.rows, (size_t)cap * WB_GPU_ROW * sizeof(int64_t));
      if (!rows) { wb_gpu_fail(1, cap, 0, 0); return NULL; }
      wb_gpu_g.rows = rows; wb_gpu_g.caprows = cap;
    }
    int64_t* row = wb_gpu_g.rows + (int64_t)i * WB_GPU_ROW;
    memset(row, 0, WB_GPU_ROW * sizeof(int64_t));
    memcpy(row, key, sizeof key);
    wb_gpu_g.nrows++;
  }
  wb_gpu_g.last_row = i;
  return wb_gpu_g.rows + (int64_t)i * WB_GPU_ROW;
}

/* One warp-level access: global memory counts the distinct 32-byte sectors its lanes
   touch (ideal: the bytes asked for, in whole sectors); shared memory counts wavefronts,
   the most distinct 4-byte words any of the 32 banks must serve (the same word is
   broadcast; ideal: the distinct words / 32, rounded up). */
static void wb_gpu_evaluate(int32_t gi) {
  const wb_gpu_group* g = &wb_gpu_g.groups[gi];
  int64_t* row = wb_gpu_row(g);
  if (!row) return;
  int64_t addr[32];
  int32_t width[32];
  int lanes = 0, aligned = 1, shift = g->space ? 2 : 5;
  int64_t bytes = 0, cost = 0, ideal = 0;
  for (int j = 0; j < 32; ++j) {
    const wb_gpu_lane* l = &wb_gpu_g.lanes[(int64_t)j * (wb_gpu_g.capgroups + WB_GPU_PAD) + gi];
    if (l->stamp != wb_gpu_g.wstamp) continue;  /* the lane did not make this access */
    addr[lanes] = l->addr; width[lanes] = l->nbytes;
    aligned &= l->nbytes == width[0] && !(l->nbytes & (l->nbytes - 1)) &&
               !(l->addr & (l->nbytes - 1));  /* a power of two, at a multiple of it */
    bytes += l->nbytes; ++lanes;
  }
  if (!lanes) return;
  int distinct = 0, per_bank[32] = {0};
  wb_gpu_set_clear();
  for (int i = 0; i < lanes; ++i)
    for (int64_t u = addr[i] >> shift; u <= (addr[i] + width[i] - 1) >> shift; ++u) {
      if (!wb_gpu_set_add(u)) continue;
      ++distinct;
      if (g->space && ++per_bank[u & 31] > cost) cost = per_bank[u & 31];
    }
  if (g->space) {
    ideal = (distinct + 31) / 32;
  } else {
    cost = distinct;
    int64_t covered = 0;  /* bytes in the union of the lanes' ranges */
    if (aligned) {  /* equal, aligned ranges: the same or apart */
      wb_gpu_set_clear();
      for (int i = 0; i < lanes; ++i) covered += wb_gpu_set_add(addr[i]) ? width[i] : 0;
    } else {
      int64_t ends[32], hi = INT64_MIN;
      for (int i = 0; i < lanes; ++i) ends[i] = addr[i] + width[i];
      wb_gpu_sort(addr, lanes);
      wb_gpu_sort(ends, lanes);
      for (int i = 0; i < lanes; ++i) {  /* i-th start pairs with i-th end: same union */
        int64_t lo = addr[i] > hi ? addr[i] : hi;
        if (ends[i] > lo) covered += ends[i] - lo;
        if (ends[i] > hi) hi = ends[i];
      }
    }
    ideal = (covered + 31) / 32;
  }
  row[5] += 1; row[6] += lanes; row[7] += bytes; row[8] += cost; row[9] += ideal;
}

static void wb_gpu_profile_flush(void) {  /* judge the warp's accesses */
  for (int32_t i = 0; i < wb_gpu_g.ngroups && !wb_gpu_g.stop; ++i) wb_gpu_evaluate(i);
  wb_gpu_g.ngroups = 0;
  if (++wb_gpu_g.wstamp == 0) {  /* wrapped: make every lane record stale */
    if (wb_gpu_g.lanes)
      memset(wb_gpu_g.lanes, 0,
             (size_t)(wb_gpu_g.capgroups + WB_GPU_PAD) * 32 * sizeof(wb_gpu_lane));
    wb_gpu_g.wstamp = 1;
  }
  wb_gpu_g.cur_thread = -1; wb_gpu_g.cur_warp = -1; wb_gpu_g.pos = 0;
}

/* -- what Python calls -- */
int32_t wb_gpu_set_mode(int32_t mode) {
  if (mode < WB_GPU_OFF || mode > WB_GPU_PROFILE) return -1;
  wb_gpu_g.mode = mode;
  wb_gpu_g.nlive = 0;
  wb_gpu_g.stop = 0; wb_gpu_g.error = 0; wb_gpu_g.has_race = 0;
  wb_gpu_g.launches = 0; wb_gpu_g.off_launches = 0;
  wb_gpu_g.kernel_id = -1; wb_gpu_g.nthreads = 0; wb_gpu_g.block_seg = 0;
  wb_gpu_g.nrows = 0; wb_gpu_g.last_row = 0; wb_gpu_g.ngroups = 0;
  if (wb_gpu_g.kernels) memset(wb_gpu_g.kernels, 0,
                               (size_t)wb_gpu_g.nkernels * WB_GPU_KERNEL_FIELDS * sizeof(int64_t));
  wb_gpu_g.cur_thread = -1; wb_gpu_g.cur_warp = -1; wb_gpu_g.pos = 0;
  if (wb_gpu_g.wstamp == 0) wb_gpu_g.wstamp = 1;
  return 0;
}
int32_t wb_gpu_get_mode(void) { return wb_gpu_g.mode; }
/* launches since wb_gpu_set_mode: [0] in its mode, [1] while the mode was off */
int32_t wb_gpu_launches(int64_t* out) {
  out[0] = wb_gpu_g.launches; out[1] = wb_gpu_g.off_launches;
  return 0;
}
int32_t wb_gpu_error(int64_t* info) {
  for (int i = 0; i < 3; ++i) info[i] = wb_gpu_g.error_info[i];
  return wb_gpu_g.error;
}
int32_t wb_gpu_race(int64_t* out) {
  if (!wb_gpu_g.has_race) return 0;
  for (int i = 0; i < WB_GPU_RACE_FIELDS; ++i) out[i] = wb_gpu_g.race[i];
  return 1;
}
int32_t wb_gpu_profile_rows(void) { return wb_gpu_g.nrows; }
int32_t wb_gpu_profile_row(int32_t i, int64_t* out) {
  if (i < 0 || i >= wb_gpu_g.nrows) return -1;
  memcpy(out, wb_gpu_g.rows + (int64_t)i * WB_GPU_ROW, WB_GPU_ROW * sizeof(int64_t));
  return 0;
}
int32_t wb_gpu_profile_kernels(void) { return wb_gpu_g.nkernels; }
int32_t wb_gpu_profile_kernel(int32_t i, int64_t* out) {
  if (i < 0 || i >= wb_gpu_g.nkernels) return -1;
  memcpy(out, wb_gpu_g.kernels + (int64_t)i * WB_GPU_KERNEL_FIELDS,
         WB_GPU_KERNEL_FIELDS * sizeof(int64_t));
  return 0;
}

static inline int32_t wb_gpu_race_cell(wb_gpu_cell* c, int32_t buffer_id, int32_t space,
                                       int32_t is_write, int64_t index, int32_t thread,
                                       int32_t stmt) {
  const uint32_t seg = wb_gpu_g.seg, block_seg = wb_gpu_g.block_seg;
  /* accesses of segments in [old_lo, block_seg) come from earlier blocks of this launch:
     they race with any write of global memory; shared memory is new in each block */
  const uint32_t old_lo = space ? block_seg : 1u;
#define WB_GPU_OLD(a) ((a).seg - old_lo < block_seg - old_lo)
#define WB_GPU_CONFLICT(a) (((a).seg == seg && (a).thread != t) || WB_GPU_OLD(a))
  const uint16_t t = (uint16_t)thread;
  if (WB_GPU_CONFLICT(c->w))
    return wb_gpu_race_found(is_write ? WB_GPU_WAW : WB_GPU_RAW, c->w, buffer_id, space,
                             index, thread, stmt);
  if (!is_write) {
    /* keep up to two readers of distinct threads of this segment, or one of an earlier
       block (it races with every later write): enough to find a race with any writer */
    const wb_gpu_acc me = {seg, t, (uint16_t)stmt};
    if (c->r1.seg == seg) {
      if (c->r1.thread != t && c->r2.seg != seg && !WB_GPU_OLD(c->r2)) c->r2 = me;
    } else if (!WB_GPU_OLD(c->r1) && !WB_GPU_OLD(c->r2) &&
               !(c->r2.seg == seg && c->r2.thread == t)) {
      c->r1 = me;
    }
    return 0;
  }
  if (WB_GPU_CONFLICT(c->r1))
    return wb_gpu_race_found(WB_GPU_WAR, c->r1, buffer_id, space, index, thread, stmt);
  if (WB_GPU_CONFLICT(c->r2))
    return wb_gpu_race_found(WB_GPU_WAR, c->r2, buffer_id, space, index, thread, stmt);
#undef WB_GPU_CONFLICT
#undef WB_GPU_OLD
  c->w.seg = seg; c->w.thread = t; c->w.stmt = (uint16_t)stmt;
  c->r1.seg = 0; c->r2.seg = 0;
  return 0;
}
"""

_GPU_KERNEL_END = r"""
static int32_t wb_gpu_kernel_end(void) {
  if (wb_gpu_g.mode == WB_GPU_PROFILE && !wb_gpu_g.stop) wb_gpu_profile_flush();
  if (wb_gpu_g.mode == WB_GPU_RACE) { wb_gpu_g.nlive = 0; wb_gpu_g.block_seg = 0; }
  return wb_gpu_g.stop;
}
"""

_GPU_REGION_BEGIN = r"""
static int32_t wb_gpu_region_begin(void) {
  if (wb_gpu_g.mode == WB_GPU_PROFILE && !wb_gpu_g.stop) wb_gpu_profile_flush();
  return wb_gpu_g.stop;
}
"""

_GPU_REGION_END = r"""
static int32_t wb_gpu_region_end(void) {
  if (wb_gpu_g.mode == WB_GPU_RACE && !wb_gpu_g.stop) {
    if (wb_gpu_g.seg == 0xFFFFFFFEu) return wb_gpu_fail(8, wb_gpu_g.kernel_id, 0, 0);
    wb_gpu_g.seg++;
  } else if (wb_gpu_g.mode == WB_GPU_PROFILE && !wb_gpu_g.stop) {
    wb_gpu_profile_flush();
  }
  return wb_gpu_g.stop;
}
"""

#: Each function a kernel calls -> its definition (without the prelude).
SOURCES = {
    "wb_gpu_access": _GPU_ACCESS,
    "wb_gpu_block_begin": _GPU_BLOCK_BEGIN,
    "wb_gpu_kernel_begin": _GPU_KERNEL_BEGIN,
    "wb_gpu_kernel_end": _GPU_KERNEL_END,
    "wb_gpu_region_begin": _GPU_REGION_BEGIN,
    "wb_gpu_region_end": _GPU_REGION_END,
}


def runtime_source() -> str:
    """The whole runtime as one piece of C (prelude and every function), for a unit
    that includes it directly (``HEADERS`` must be included before it).

    >>> "int32_t wb_gpu_set_mode(int32_t mode)" in runtime_source()
    True
    """
    return PRELUDE + "".join(SOURCES.values())
