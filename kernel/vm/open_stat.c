// SPDX-License-Identifier: MIT
/*
 * open_stat: guest test tool (kernel/vm) for compound OPEN+GETATTR.
 *
 * For i in 0..N-1: open DIR/f<i> read-only, fstat() it, check st_size ==
 * SIZE, close it. Prints
 *   OPEN_STAT opens=N failed=F bad_size=B ns=T opens_per_s=R
 * and exits 0 only if every open succeeded and every size matched.
 *
 * Usage: open_stat DIR N SIZE
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: open_stat DIR N SIZE\n");
    return 2;
  }
  const char *dir = argv[1];
  long n = strtol(argv[2], NULL, 10);
  long long size = strtoll(argv[3], NULL, 10);
  if (n <= 0 || size < 0) {
    fprintf(stderr, "open_stat: N must be > 0 and SIZE >= 0\n");
    return 2;
  }
  long failed = 0, bad = 0;
  char path[4096];
  uint64_t t0 = now_ns();
  for (long i = 0; i < n; ++i) {
    snprintf(path, sizeof(path), "%s/f%ld", dir, i);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
      perror(path);
      ++failed;
      continue;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
      perror("fstat");
      ++failed;
    } else if (st.st_size != size) {
      fprintf(stderr, "open_stat: %s has size %lld, want %lld\n", path,
              (long long)st.st_size, size);
      ++bad;
    }
    close(fd);
  }
  uint64_t ns = now_ns() - t0;
  printf("OPEN_STAT opens=%ld failed=%ld bad_size=%ld ns=%llu opens_per_s=%.1f\n",
         n, failed, bad, (unsigned long long)ns,
         ns ? (double)n * 1e9 / (double)ns : 0.0);
  return failed || bad ? 1 : 0;
}
