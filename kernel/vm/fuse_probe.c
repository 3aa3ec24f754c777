// SPDX-License-Identifier: MIT
/*
 * fuse_probe: a tiny, self-contained raw FUSE server used only by the kernel
 * VM harness (kernel/vm). It is a test tool, not the stripefs product server.
 *
 * It mounts with the raw mount(2) syscall on /dev/fuse (no libfuse), answers
 * FUSE_INIT (optionally requesting opt-alignment, FUSE_ALIGN_PG_ORDER, and
 * FUSE-over-io-uring), serves a flat in-memory directory of regular files, and
 * logs what the kernel sent: whether FUSE_ALIGN_PG_ORDER was offered, and one
 * line per WRITE (offset, size, write_flags, io-uring queue, serving CPU).
 * The tests in kernel/vm/tests compute aligned-% and queue spreads from it.
 *
 * Ownership: one process per mount; the main thread owns /dev/fuse and serves
 * the legacy read/write transport; with --uring one thread per queue owns its
 * own io_uring and ring-entry buffers. The file table is guarded by one mutex.
 * The process exits when the kernel ends the connection (umount).
 *
 * Usage: fuse_probe MOUNTPOINT [--log FILE] [--align-order N] [--uring]
 *          [--queue-depth N] [--max-pages N] [--no-data] [--write-delay-us N]
 *          [--max-background N] [--log-all]
 * Files whose name starts with "dio" get FOPEN_DIRECT_IO when opened for
 * writing (read-only opens keep using the page cache).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- FUSE ABI (Linux 7.2 uapi, protocol 7.45), defined here on purpose:
 * the build host's headers are older and the alignment field is ours. ---- */
enum {
  OP_LOOKUP = 1, OP_FORGET = 2, OP_GETATTR = 3, OP_SETATTR = 4, OP_MKNOD = 8,
  OP_UNLINK = 10, OP_OPEN = 14, OP_READ = 15, OP_WRITE = 16, OP_STATFS = 17,
  OP_RELEASE = 18, OP_FSYNC = 20, OP_GETXATTR = 22, OP_FLUSH = 25,
  OP_INIT = 26, OP_OPENDIR = 27, OP_READDIR = 28, OP_RELEASEDIR = 29,
  OP_FSYNCDIR = 30, OP_ACCESS = 34, OP_CREATE = 35, OP_INTERRUPT = 36,
  OP_DESTROY = 38, OP_BATCH_FORGET = 42, OP_FALLOCATE = 43,
  OP_READDIRPLUS = 44, OP_LSEEK = 46, OP_STATX = 52, OP_MAX = 64
};
#define F_ASYNC_READ (1u << 0)
#define F_BIG_WRITES (1u << 5)
#define F_ASYNC_DIO (1u << 15)
#define F_WRITEBACK_CACHE (1u << 16)
#define F_PARALLEL_DIROPS (1u << 18)
#define F_MAX_PAGES (1u << 22)
#define F_INIT_EXT (1u << 30)
#define F2_OVER_IO_URING (1u << (41 - 32))
#define F2_ALIGN_PG_ORDER (1u << (50 - 32))
#define FOPEN_DIRECT_IO 1u
#define WRITE_CACHE 1u
#define FATTR_MODE (1u << 0)
#define FATTR_SIZE (1u << 3)

struct in_header { uint32_t len, opcode; uint64_t unique, nodeid;
  uint32_t uid, gid, pid; uint16_t total_extlen, padding; };
struct out_header { uint32_t len; int32_t error; uint64_t unique; };
struct attr { uint64_t ino, size, blocks, atime, mtime, ctime;
  uint32_t atimensec, mtimensec, ctimensec, mode, nlink, uid, gid, rdev,
      blksize, flags; };
struct entry_out { uint64_t nodeid, generation, entry_valid, attr_valid;
  uint32_t entry_valid_nsec, attr_valid_nsec; struct attr attr; };
struct attr_out { uint64_t attr_valid; uint32_t attr_valid_nsec, dummy;
  struct attr attr; };
struct setattr_in { uint32_t valid, padding; uint64_t fh, size, lock_owner,
  atime, mtime, ctime; uint32_t atimensec, mtimensec, ctimensec, mode,
  unused4, uid, gid, unused5; };
struct create_in { uint32_t flags, mode, umask, open_flags; };
struct open_in { uint32_t flags, open_flags; };
struct open_out { uint64_t fh; uint32_t open_flags; int32_t backing_id; };
struct rw_in { uint64_t fh, offset; uint32_t size, rw_flags; uint64_t lock_owner;
  uint32_t flags, padding; };
struct write_out { uint32_t size, padding; };
struct statfs_out { uint64_t blocks, bfree, bavail, files, ffree;
  uint32_t bsize, namelen, frsize, padding, spare[6]; };
struct init_in { uint32_t major, minor, max_readahead, flags, flags2,
  unused[11]; };
struct init_out { uint32_t major, minor, max_readahead, flags;
  uint16_t max_background, congestion_threshold; uint32_t max_write, time_gran;
  uint16_t max_pages, map_alignment; uint32_t flags2, max_stack_depth;
  uint16_t request_timeout; uint8_t align_page_order, padding8;
  uint16_t unused[10]; };
struct dirent_hdr { uint64_t ino, off; uint32_t namelen, type; };
struct uring_ent_in_out { uint64_t flags, commit_id; uint32_t payload_sz,
  padding; uint64_t reserved; };
struct uring_req_header { char in_out[128]; char op_in[128];
  struct uring_ent_in_out ent; };
struct uring_cmd_req { uint64_t flags, commit_id; uint16_t qid;
  uint8_t padding[6]; };
enum { URING_CMD_REGISTER = 1, URING_CMD_COMMIT_AND_FETCH = 2 };
_Static_assert(sizeof(struct init_out) == 64, "init_out size");
_Static_assert(__builtin_offsetof(struct init_out, align_page_order) == 42,
               "align_page_order offset");
_Static_assert(sizeof(struct in_header) == 40, "in_header size");
_Static_assert(sizeof(struct attr) == 88, "attr size");
_Static_assert(sizeof(struct setattr_in) == 88, "setattr_in size");
_Static_assert(sizeof(struct rw_in) == 40, "rw_in size");
_Static_assert(sizeof(struct uring_req_header) == 288, "ring header size");

/* Size of the fixed per-opcode header (the io-uring "op_in" part). */
static size_t op_header_size(uint32_t op) {
  switch (op) {
    case OP_GETATTR: return 16;
    case OP_SETATTR: return sizeof(struct setattr_in);
    case OP_MKNOD: return 16;
    case OP_OPEN: case OP_OPENDIR: return sizeof(struct open_in);
    case OP_READ: case OP_WRITE: case OP_READDIR: case OP_READDIRPLUS:
      return sizeof(struct rw_in);
    case OP_RELEASE: case OP_RELEASEDIR: case OP_FLUSH: return 24;
    case OP_FSYNC: case OP_FSYNCDIR: return 16;
    case OP_GETXATTR: return 8;
    case OP_INIT: return sizeof(struct init_in);
    case OP_ACCESS: return 8;
    case OP_CREATE: return sizeof(struct create_in);
    case OP_FALLOCATE: return 32;
    case OP_LSEEK: return 24;
    case OP_STATX: return 24;
    case OP_FORGET: case OP_INTERRUPT: return 8;
    default: return 0; /* LOOKUP, UNLINK, STATFS, ...: name or nothing */
  }
}

/* ---- options and state ---- */
static struct {
  const char *mnt, *log_path;
  int align_order; /* -1: do not request */
  int uring, queue_depth, max_pages, no_data, write_delay_us, max_background,
      log_all;
} opt = {NULL, NULL, -1, 0, 2, 256, 0, 0, 12, 0};

static int fuse_fd = -1;
static FILE *logf;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t fs_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t negotiated_max_write;
static int uring_negotiated;
static unsigned long op_count[OP_MAX + 1];

static void logln(const char *fmt, ...) {
  va_list ap;
  pthread_mutex_lock(&log_mu);
  va_start(ap, fmt);
  vfprintf(logf, fmt, ap);
  va_end(ap);
  fputc('\n', logf);
  pthread_mutex_unlock(&log_mu);
}

static void die(const char *what) {
  fprintf(stderr, "fuse_probe: %s: %s\n", what, strerror(errno));
  exit(1);
}

#define MAX_FILES 64
#define ROOT_INO 1
struct file {
  int used;
  char name[64];
  uint64_t size;
  uint32_t mode;
  char *data;
  uint64_t cap;
};
static struct file files[MAX_FILES]; /* inode = index + 2 */

static struct file *file_by_ino(uint64_t ino) {
  if (ino < 2 || ino >= 2 + MAX_FILES || !files[ino - 2].used) return NULL;
  return &files[ino - 2];
}

static void fill_attr(uint64_t ino, struct attr *a) {
  memset(a, 0, sizeof(*a));
  a->ino = ino;
  a->blksize = 4096;
  if (ino == ROOT_INO) {
    a->mode = S_IFDIR | 0755;
    a->nlink = 2;
    return;
  }
  struct file *f = file_by_ino(ino);
  a->mode = f->mode;
  a->nlink = 1;
  a->size = f->size;
  a->blocks = (f->size + 511) / 512;
}

/* Grows a file's backing store; returns 0 or -ENOSPC/-ENOMEM. */
static int file_reserve(struct file *f, uint64_t end) {
  if (opt.no_data || end <= f->cap) return 0;
  if (end > (1ull << 31)) return -ENOSPC;
  uint64_t cap = f->cap ? f->cap : (1 << 20);
  while (cap < end) cap *= 2;
  char *p = realloc(f->data, cap);
  if (!p) return -ENOMEM;
  memset(p + f->cap, 0, cap - f->cap);
  f->data = p;
  f->cap = cap;
  return 0;
}

/* A reply under construction: out args concatenated in buf. */
struct reply {
  int error;
  size_t len;
  char *buf;
  size_t cap;
  int none; /* request takes no reply (FORGET, INTERRUPT) */
};

static void *reply_put(struct reply *r, size_t n) {
  if (r->len + n > r->cap) {
    r->error = -EIO;
    return NULL;
  }
  void *p = r->buf + r->len;
  memset(p, 0, n);
  r->len += n;
  return p;
}

static const char *name_arg(const char *payload, size_t len) {
  if (len == 0 || payload[len - 1] != '\0') return NULL;
  return payload;
}

static void do_entry(struct reply *r, uint64_t ino) {
  struct entry_out *e = reply_put(r, sizeof(*e));
  if (!e) return;
  e->nodeid = ino;
  e->entry_valid = 1;
  e->attr_valid = 1;
  fill_attr(ino, &e->attr);
}

static void handle_init(const struct in_header *h, const void *op,
                        struct reply *r) {
  const struct init_in *in = op;
  (void)h;
  int align_offered = !!(in->flags2 & F2_ALIGN_PG_ORDER);
  int uring_offered = !!(in->flags2 & F2_OVER_IO_URING);
  logln("INIT major=%u minor=%u flags=0x%x flags2=0x%x align_offered=%d "
        "uring_offered=%d",
        in->major, in->minor, in->flags, in->flags2, align_offered,
        uring_offered);
  struct init_out *o = reply_put(r, sizeof(*o));
  if (!o) return;
  o->major = 7;
  o->minor = in->minor < 45 ? in->minor : 45;
  o->max_readahead = in->max_readahead;
  o->flags = (in->flags & (F_ASYNC_READ | F_BIG_WRITES | F_ASYNC_DIO |
                           F_WRITEBACK_CACHE | F_PARALLEL_DIROPS |
                           F_MAX_PAGES | F_INIT_EXT));
  o->max_background = (uint16_t)opt.max_background;
  o->congestion_threshold = (uint16_t)(opt.max_background * 3 / 4);
  o->max_pages = (uint16_t)opt.max_pages;
  o->max_write = (uint32_t)opt.max_pages * 4096u;
  negotiated_max_write = o->max_write;
  o->time_gran = 1;
  /* The byte's offset follows the server's rule (fuse/fuse_abi.h,
   * AlignPageOrderOffset): request_timeout takes offset 40 from 7.43 on, so
   * the byte sits at 42 there and at 40 on older kernels (6.1, 6.12 lines). */
  size_t align_off = in->minor >= 43 ? 42 : 40;
  if (opt.align_order >= 0) {
    o->flags2 |= F2_ALIGN_PG_ORDER;
    ((uint8_t *)o)[align_off] = (uint8_t)opt.align_order;
  }
  if (opt.uring && uring_offered) {
    o->flags2 |= F2_OVER_IO_URING;
    uring_negotiated = 1;
  }
  /* From the reply itself, so the log cannot claim a request the reply lacks. */
  int align_requested = !!(o->flags2 & F2_ALIGN_PG_ORDER);
  logln("INIT_REPLY flags=0x%x flags2=0x%x max_pages=%u max_write=%u "
        "align_requested=%d align_order=%d align_offset=%zu "
        "align_acknowledged=%d uring=%d",
        o->flags, o->flags2, o->max_pages, o->max_write, align_requested,
        align_requested ? ((const uint8_t *)o)[align_off] : -1, align_off,
        align_requested && align_offered, !!(o->flags2 & F2_OVER_IO_URING));
  if (opt.uring && !uring_offered)
    logln("URING not offered by the kernel (enable_uring=N?): legacy /dev/fuse");
}

/* Serves one request; 'op' is the fixed op header, 'pl' the rest. */
static void handle(const struct in_header *h, const char *op, size_t op_len,
                   const char *pl, size_t pl_len, struct reply *r, int qid) {
  uint32_t opc = h->opcode;
  if (op_len < op_header_size(opc)) {
    r->error = -EINVAL;
    return;
  }
  if (opc <= OP_MAX) __atomic_fetch_add(&op_count[opc], 1, __ATOMIC_RELAXED);
  if (opt.log_all && opc != OP_WRITE)
    logln("REQ op=%u qid=%d cpu=%d", opc, qid, sched_getcpu());
  switch (opc) {
    case OP_INIT:
      handle_init(h, op, r);
      return;
    case OP_FORGET: case OP_BATCH_FORGET: case OP_INTERRUPT:
      r->none = 1;
      return;
    case OP_DESTROY:
      return;
    case OP_STATFS: {
      struct statfs_out *s = reply_put(r, sizeof(*s));
      if (!s) return;
      s->blocks = s->bfree = s->bavail = 1 << 24;
      s->files = s->ffree = MAX_FILES;
      s->bsize = s->frsize = 4096;
      s->namelen = 63;
      return;
    }
    default:
      break;
  }
  pthread_mutex_lock(&fs_mu);
  switch (opc) {
    case OP_LOOKUP: {
      const char *name = name_arg(pl, pl_len);
      r->error = -ENOENT;
      if (!name || h->nodeid != ROOT_INO) break;
      for (int i = 0; i < MAX_FILES; i++)
        if (files[i].used && !strcmp(files[i].name, name)) {
          r->error = 0;
          do_entry(r, (uint64_t)i + 2);
          break;
        }
      break;
    }
    case OP_GETATTR: case OP_SETATTR: {
      if (h->nodeid != ROOT_INO && !file_by_ino(h->nodeid)) {
        r->error = -ENOENT;
        break;
      }
      if (opc == OP_SETATTR && h->nodeid != ROOT_INO) {
        const struct setattr_in *s = (const void *)op;
        struct file *f = file_by_ino(h->nodeid);
        if (s->valid & FATTR_SIZE) {
          int e = file_reserve(f, s->size);
          if (e) { r->error = e; break; }
          if (!opt.no_data && s->size < f->size)
            memset(f->data + s->size, 0, f->size - s->size);
          f->size = s->size;
        }
        if (s->valid & FATTR_MODE) f->mode = S_IFREG | (s->mode & 07777);
      }
      struct attr_out *a = reply_put(r, sizeof(*a));
      if (!a) break;
      a->attr_valid = 1;
      fill_attr(h->nodeid, &a->attr);
      break;
    }
    case OP_CREATE: case OP_MKNOD: {
      const char *name = name_arg(pl, pl_len);
      uint32_t mode = opc == OP_CREATE ? ((const struct create_in *)op)->mode
                                       : *(const uint32_t *)op;
      if (!name || h->nodeid != ROOT_INO || strlen(name) >= 64 ||
          !S_ISREG(mode)) {
        r->error = name ? -EPERM : -EINVAL;
        break;
      }
      int slot = -1;
      for (int i = 0; i < MAX_FILES; i++) {
        if (files[i].used && !strcmp(files[i].name, name)) { slot = -2; break; }
        if (!files[i].used && slot == -1) slot = i;
      }
      if (slot < 0) { r->error = slot == -2 ? -EEXIST : -ENOSPC; break; }
      struct file *f = &files[slot];
      memset(f, 0, sizeof(*f));
      f->used = 1;
      snprintf(f->name, sizeof(f->name), "%s", name);
      f->mode = S_IFREG | (mode & 07777);
      do_entry(r, (uint64_t)slot + 2);
      if (opc == OP_CREATE) {
        struct open_out *o = reply_put(r, sizeof(*o));
        if (o && !strncmp(name, "dio", 3)) o->open_flags = FOPEN_DIRECT_IO;
      }
      break;
    }
    case OP_UNLINK: {
      const char *name = name_arg(pl, pl_len);
      r->error = -ENOENT;
      if (!name) break;
      for (int i = 0; i < MAX_FILES; i++)
        if (files[i].used && !strcmp(files[i].name, name)) {
          free(files[i].data);
          memset(&files[i], 0, sizeof(files[i]));
          r->error = 0;
        }
      break;
    }
    case OP_OPEN: case OP_OPENDIR: {
      struct file *f = file_by_ino(h->nodeid);
      if (opc == OP_OPEN && !f) { r->error = -ENOENT; break; }
      struct open_out *o = reply_put(r, sizeof(*o));
      uint32_t acc = ((const struct open_in *)op)->flags & O_ACCMODE;
      if (o && f && !strncmp(f->name, "dio", 3) && acc != O_RDONLY)
        o->open_flags = FOPEN_DIRECT_IO;
      break;
    }
    case OP_READ: {
      const struct rw_in *in = (const void *)op;
      struct file *f = file_by_ino(h->nodeid);
      if (!f) { r->error = -ENOENT; break; }
      uint64_t n = 0;
      if (in->offset < f->size) n = f->size - in->offset;
      if (n > in->size) n = in->size;
      char *p = reply_put(r, n);
      if (p && !opt.no_data) memcpy(p, f->data + in->offset, n);
      break;
    }
    case OP_WRITE: {
      const struct rw_in *in = (const void *)op;
      struct file *f = file_by_ino(h->nodeid);
      if (!f) { r->error = -ENOENT; break; }
      if (pl_len < in->size) { r->error = -EINVAL; break; }
      uint64_t end = in->offset + in->size;
      int e = file_reserve(f, end);
      if (e) { r->error = e; break; }
      if (!opt.no_data) memcpy(f->data + in->offset, pl, in->size);
      if (end > f->size) f->size = end;
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      logln("WRITE ino=%lu off=%lu size=%u flags=0x%x cache=%d qid=%d cpu=%d "
            "unique=%lu t_us=%lu",
            (unsigned long)h->nodeid, (unsigned long)in->offset, in->size,
            in->rw_flags, !!(in->rw_flags & WRITE_CACHE), qid, sched_getcpu(),
            (unsigned long)h->unique,
            (unsigned long)(ts.tv_sec * 1000000ul + ts.tv_nsec / 1000));
      struct write_out *o = reply_put(r, sizeof(*o));
      if (o) o->size = in->size;
      break;
    }
    case OP_READDIR: {
      const struct rw_in *in = (const void *)op;
      uint64_t idx = 0;
      for (int i = -2; i < MAX_FILES; i++) {
        const char *name;
        uint64_t ino;
        if (i == -2) { name = "."; ino = ROOT_INO; }
        else if (i == -1) { name = ".."; ino = ROOT_INO; }
        else if (files[i].used) { name = files[i].name; ino = (uint64_t)i + 2; }
        else continue;
        idx++;
        if (idx <= in->offset) continue;
        size_t nl = strlen(name);
        size_t rec = (sizeof(struct dirent_hdr) + nl + 7) & ~(size_t)7;
        if (r->len + rec > in->size) break;
        struct dirent_hdr *d = reply_put(r, rec);
        if (!d) break;
        d->ino = ino;
        d->off = idx;
        d->namelen = (uint32_t)nl;
        d->type = i < 0 ? 4 : 8; /* DT_DIR, DT_REG */
        memcpy(d + 1, name, nl);
      }
      break;
    }
    case OP_RELEASE: case OP_RELEASEDIR: case OP_FLUSH: case OP_FSYNC:
    case OP_FSYNCDIR: case OP_ACCESS:
      break;
    default:
      r->error = -ENOSYS;
      break;
  }
  pthread_mutex_unlock(&fs_mu);
  if (opc == OP_WRITE && opt.write_delay_us > 0) usleep(opt.write_delay_us);
}

/* ---- FUSE-over-io-uring: one thread per queue ---- */
struct queue_ctx {
  int qid;
  struct io_uring ring;
  struct uring_req_header *hdrs;
  char **payloads;
  size_t payload_sz;
};

static void submit_cmd(struct queue_ctx *q, int idx, uint32_t cmd_op,
                       uint64_t commit_id, struct iovec *iov) {
  struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
  if (!sqe) {
    io_uring_submit(&q->ring);
    sqe = io_uring_get_sqe(&q->ring);
  }
  void *raw = sqe; /* SQE128: the command area extends the SQE */
  __asm__("" : "+r"(raw));
  memset(raw, 0, 128);
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fuse_fd;
  sqe->cmd_op = cmd_op;
  sqe->user_data = (uint64_t)idx;
  if (cmd_op == URING_CMD_REGISTER) {
    sqe->addr = (uint64_t)(uintptr_t)iov;
    sqe->len = 2;
  }
  struct uring_cmd_req *req = (struct uring_cmd_req *)sqe->cmd;
  req->qid = (uint16_t)q->qid;
  req->commit_id = commit_id;
}

static void *queue_thread(void *arg) {
  struct queue_ctx *q = arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(q->qid, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (io_uring_queue_init(opt.queue_depth * 2 + 2, &q->ring,
                          IORING_SETUP_SQE128) < 0) {
    logln("URING qid=%d io_uring_queue_init failed", q->qid);
    return NULL;
  }
  struct iovec *iovs = calloc((size_t)opt.queue_depth * 2, sizeof(*iovs));
  for (int i = 0; i < opt.queue_depth; i++) {
    iovs[2 * i].iov_base = &q->hdrs[i];
    iovs[2 * i].iov_len = sizeof(q->hdrs[i]);
    iovs[2 * i + 1].iov_base = q->payloads[i];
    iovs[2 * i + 1].iov_len = q->payload_sz;
    submit_cmd(q, i, URING_CMD_REGISTER, 0, &iovs[2 * i]);
  }
  io_uring_submit(&q->ring);
  struct reply r = {0};
  for (;;) {
    struct io_uring_cqe *cqe;
    int e = io_uring_wait_cqe(&q->ring, &cqe);
    if (e == -EINTR) continue;
    if (e < 0) break;
    int idx = (int)cqe->user_data;
    int res = cqe->res;
    io_uring_cqe_seen(&q->ring, cqe);
    if (res < 0) {
      if (res != -ENOTCONN && res != -ECANCELED && res != -ECONNABORTED)
        logln("URING qid=%d cqe error %d", q->qid, res);
      break;
    }
    struct uring_req_header *hd = &q->hdrs[idx];
    struct in_header h;
    memcpy(&h, hd->in_out, sizeof(h));
    size_t pl_len = hd->ent.payload_sz;
    uint64_t commit_id = hd->ent.commit_id;
    r = (struct reply){0};
    r.buf = q->payloads[idx]; /* reply payload reuses the payload buffer */
    r.cap = q->payload_sz;
    /* Request payload (e.g. WRITE data, names) is read before the reply
     * overwrites the buffer: copy names and WRITE data are consumed inside
     * handle() before reply_put() is called for WRITE (after the memcpy). */
    static __thread char *tmp;
    static __thread size_t tmp_cap;
    if (pl_len > tmp_cap) {
      free(tmp);
      tmp = malloc(pl_len);
      tmp_cap = pl_len;
    }
    memcpy(tmp, q->payloads[idx], pl_len);
    handle(&h, hd->op_in, sizeof(hd->op_in), tmp, pl_len, &r, q->qid);
    struct out_header oh = {0, r.error, h.unique};
    if (r.error) r.len = 0;
    oh.len = (uint32_t)(sizeof(oh) + r.len);
    memcpy(hd->in_out, &oh, sizeof(oh));
    hd->ent.payload_sz = (uint32_t)r.len;
    submit_cmd(q, idx, URING_CMD_COMMIT_AND_FETCH, commit_id, NULL);
    io_uring_submit(&q->ring);
  }
  return NULL;
}

static void start_uring(void) {
  int nq = (int)sysconf(_SC_NPROCESSORS_CONF);
  size_t payload = negotiated_max_write;
  if (payload < (size_t)opt.max_pages * 4096) payload = (size_t)opt.max_pages * 4096;
  if (payload < 8192) payload = 8192;
  logln("URING queues=%d depth=%d payload=%zu", nq, opt.queue_depth, payload);
  for (int qid = 0; qid < nq; qid++) {
    struct queue_ctx *q = calloc(1, sizeof(*q));
    q->qid = qid;
    q->payload_sz = payload;
    q->hdrs = calloc((size_t)opt.queue_depth, sizeof(*q->hdrs));
    q->payloads = calloc((size_t)opt.queue_depth, sizeof(char *));
    for (int i = 0; i < opt.queue_depth; i++) q->payloads[i] = malloc(payload);
    pthread_t t;
    if (pthread_create(&t, NULL, queue_thread, q)) die("pthread_create");
    pthread_detach(t);
  }
}

static void finish(int code) {
  pthread_mutex_lock(&log_mu);
  for (int i = 0; i <= OP_MAX; i++)
    if (op_count[i]) fprintf(logf, "OPCOUNT op=%d count=%lu\n", i, op_count[i]);
  fprintf(logf, "EXIT code=%d\n", code);
  fflush(logf);
  fsync(fileno(logf));
  _exit(code);
}

static void usage(void) {
  fprintf(stderr,
          "usage: fuse_probe MOUNTPOINT [--log FILE] [--align-order N] "
          "[--uring] [--queue-depth N]\n"
          "       [--max-pages N] [--no-data] [--write-delay-us N] "
          "[--max-background N] [--log-all]\n");
  exit(2);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--log") && v) { opt.log_path = v; i++; }
    else if (!strcmp(a, "--align-order") && v) { opt.align_order = atoi(v); i++; }
    else if (!strcmp(a, "--uring")) opt.uring = 1;
    else if (!strcmp(a, "--queue-depth") && v) { opt.queue_depth = atoi(v); i++; }
    else if (!strcmp(a, "--max-pages") && v) { opt.max_pages = atoi(v); i++; }
    else if (!strcmp(a, "--no-data")) opt.no_data = 1;
    else if (!strcmp(a, "--write-delay-us") && v) { opt.write_delay_us = atoi(v); i++; }
    else if (!strcmp(a, "--max-background") && v) { opt.max_background = atoi(v); i++; }
    else if (!strcmp(a, "--log-all")) opt.log_all = 1;
    else if (a[0] != '-' && !opt.mnt) opt.mnt = a;
    else usage();
  }
  if (!opt.mnt || opt.queue_depth < 1 || opt.max_pages < 1 ||
      opt.max_pages > 65535)
    usage();
  logf = opt.log_path ? fopen(opt.log_path, "w") : stdout;
  if (!logf) die("open log");
  fuse_fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fuse_fd < 0) die("open /dev/fuse");
  char mopts[128];
  snprintf(mopts, sizeof(mopts), "fd=%d,rootmode=40000,user_id=0,group_id=0",
           fuse_fd);
  if (mount("fuse_probe", opt.mnt, "fuse", MS_NOSUID | MS_NODEV, mopts))
    die("mount");
  signal(SIGPIPE, SIG_IGN);
  size_t bufsz = (size_t)opt.max_pages * 4096 + 65536;
  char *buf = malloc(bufsz);
  char *rbuf = malloc(bufsz);
  int uring_started = 0;
  for (;;) {
    ssize_t n = read(fuse_fd, buf, bufsz);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == ENODEV) finish(0);
      die("read /dev/fuse");
    }
    if ((size_t)n < sizeof(struct in_header)) continue;
    struct in_header h;
    memcpy(&h, buf, sizeof(h));
    if (h.len != (uint32_t)n) continue;
    size_t rest = (size_t)n - sizeof(h);
    size_t oplen = op_header_size(h.opcode);
    if (oplen > rest) oplen = rest;
    struct reply r = {0};
    r.buf = rbuf + sizeof(struct out_header);
    r.cap = bufsz - sizeof(struct out_header);
    handle(&h, buf + sizeof(h), oplen, buf + sizeof(h) + oplen, rest - oplen,
           &r, -1);
    if (r.none) continue;
    struct out_header oh = {0, r.error, h.unique};
    if (r.error) r.len = 0;
    oh.len = (uint32_t)(sizeof(oh) + r.len);
    memcpy(rbuf, &oh, sizeof(oh));
    if (write(fuse_fd, rbuf, oh.len) < 0 && errno != ENOENT)
      logln("reply write failed op=%u: %s", h.opcode, strerror(errno));
    if (h.opcode == OP_INIT) {
      fflush(logf);
      if (uring_negotiated && !uring_started) {
        uring_started = 1;
        start_uring();
      }
    }
  }
}
