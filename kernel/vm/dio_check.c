// SPDX-License-Identifier: MIT
/*
 * dio_check: guest test tool (kernel/vm) for direct-IO page-cache invalidation,
 * the xfstests generic/451 scenario on FUSE.
 *
 * A reader thread keeps reading FILE through the page cache (buffered,
 * read-only fd) while the main thread rewrites it with ASYNC direct writes
 * submitted through io_uring (several in flight). After each round completes,
 * a buffered read must return the round's new pattern; a stale page-cache
 * page shows up as a mismatch. The write fd is opened with O_DIRECT, unless
 * --no-odirect: then the file must be one the server opens with
 * FOPEN_DIRECT_IO for writing (fuse_probe does that for names "dio*").
 *
 * Usage: dio_check FILE [--rounds N] [--size BYTES] [--no-odirect]
 * Prints "DIO_CHECK rounds=N mismatches=M" and exits 0 only if M == 0.
 *
 * dio_check FILE --burst [--size BYTES]: only submits one burst of async
 * O_DIRECT writes (all chunks at once) and waits for them; the io-uring queue
 * tests use it to create a backlog of background requests from one CPU.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK (128 * 1024)
static const char *path;
static size_t size = 4 << 20;
static atomic_int stop;

static void *reader(void *arg) {
  (void)arg;
  int fd = open(path, O_RDONLY);
  if (fd < 0) return NULL;
  char *buf = malloc(CHUNK);
  while (!atomic_load(&stop)) {
    for (size_t off = 0; off < size && !atomic_load(&stop); off += CHUNK)
      if (pread(fd, buf, CHUNK, (off_t)off) < 0) break;
  }
  free(buf);
  close(fd);
  return NULL;
}

/* Submits size/CHUNK async writes at once, waits for all; 0 on success. */
static int run_burst(int odirect) {
  int fd = open(path, O_WRONLY | O_CREAT | (odirect ? O_DIRECT : 0), 0644);
  if (fd < 0) { perror("open"); return 1; }
  /* FUSE turns size-extending async direct writes into blocking ones: size first. */
  if (ftruncate(fd, (off_t)size)) { perror("ftruncate"); return 1; }
  char *buf;
  if (posix_memalign((void **)&buf, 4096, size)) return 1;
  memset(buf, 0x5a, size);
  unsigned n = (unsigned)(size / CHUNK);
  struct io_uring ring;
  if (io_uring_queue_init(n < 4096 ? n : 4096, &ring, 0) < 0) { perror("io_uring"); return 1; }
  for (unsigned i = 0; i < n; i++) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    io_uring_prep_write(sqe, fd, buf + (size_t)i * CHUNK, CHUNK, (off_t)i * CHUNK);
  }
  io_uring_submit(&ring);
  int bad = 0;
  for (unsigned i = 0; i < n; i++) {
    struct io_uring_cqe *cqe;
    if (io_uring_wait_cqe(&ring, &cqe)) { perror("wait_cqe"); return 1; }
    if (cqe->res != CHUNK) bad++;
    io_uring_cqe_seen(&ring, cqe);
  }
  printf("DIO_BURST writes=%u failed=%d\n", n, bad);
  return bad ? 1 : 0;
}

int main(int argc, char **argv) {
  int rounds = 20, odirect = 1, burst = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--size") && i + 1 < argc)
      size = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--no-odirect")) odirect = 0;
    else if (!strcmp(argv[i], "--burst")) burst = 1;
    else if (argv[i][0] != '-' && !path) path = argv[i];
    else {
      fprintf(stderr, "usage: dio_check FILE [--rounds N] [--size BYTES] [--no-odirect]\n");
      return 2;
    }
  }
  if (!path || size % CHUNK) return 2;
  if (burst) return run_burst(odirect);
  /* Create and fill the file buffered, then populate the page cache. */
  int cfd = open(path, O_RDWR | O_CREAT, 0644);
  if (cfd < 0) { perror("create"); return 1; }
  char *buf;
  if (posix_memalign((void **)&buf, 4096, size)) return 1;
  memset(buf, 0xee, size);
  if (pwrite(cfd, buf, size, 0) != (ssize_t)size || fsync(cfd)) {
    perror("initial write");
    return 1;
  }
  close(cfd);
  int wfd = open(path, O_WRONLY | (odirect ? O_DIRECT : 0));
  int rfd = open(path, O_RDONLY);
  if (wfd < 0 || rfd < 0) { perror("open"); return 1; }
  char *rbuf = malloc(size);
  if (pread(rfd, rbuf, size, 0) != (ssize_t)size) { perror("pread"); return 1; }

  struct io_uring ring;
  if (io_uring_queue_init(64, &ring, 0) < 0) { perror("io_uring"); return 1; }
  pthread_t t;
  pthread_create(&t, NULL, reader, NULL);
  int mismatches = 0;
  for (int r = 0; r < rounds; r++) {
    unsigned char pat = (unsigned char)(r + 1);
    memset(buf, pat, size);
    int n = 0;
    for (size_t off = 0; off < size; off += CHUNK, n++) {
      struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
      if (!sqe) { io_uring_submit(&ring); sqe = io_uring_get_sqe(&ring); }
      io_uring_prep_write(sqe, wfd, buf + off, CHUNK, off);
    }
    io_uring_submit(&ring);
    for (int i = 0; i < n; i++) {
      struct io_uring_cqe *cqe;
      if (io_uring_wait_cqe(&ring, &cqe)) { perror("wait_cqe"); return 1; }
      if (cqe->res != CHUNK) {
        fprintf(stderr, "async write returned %d\n", cqe->res);
        return 1;
      }
      io_uring_cqe_seen(&ring, cqe);
    }
    if (pread(rfd, rbuf, size, 0) != (ssize_t)size) { perror("pread"); return 1; }
    size_t bad = 0;
    for (size_t i = 0; i < size; i++)
      if ((unsigned char)rbuf[i] != pat) bad++;
    if (bad) {
      mismatches++;
      fprintf(stderr, "round %d: %zu stale bytes after async direct write\n", r, bad);
    }
  }
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  printf("DIO_CHECK mode=%s rounds=%d mismatches=%d\n",
         odirect ? "O_DIRECT" : "FOPEN_DIRECT_IO", rounds, mismatches);
  return mismatches ? 1 : 0;
}
