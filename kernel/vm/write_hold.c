// SPDX-License-Identifier: MIT
/*
 * write_hold: guest test tool (kernel/vm). Writes KIB KiB of zeroes to FILE
 * (created/truncated) in 1 MiB write(2) calls, prints "WRITE_HOLD written",
 * then keeps the file open for SECONDS before closing it. FUSE sends a
 * writeback-flushing FLUSH on every close(2), so a test that must see data
 * written back by the kernel's own writeback (not by close or fsync) keeps
 * the file open with this tool.
 *
 * Usage: write_hold FILE KIB SECONDS
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  static char buf[1 << 20];
  if (argc != 4) {
    fprintf(stderr, "usage: write_hold FILE KIB SECONDS\n");
    return 2;
  }
  long left = atol(argv[2]) * 1024L;
  int secs = atoi(argv[3]);
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    perror("write_hold: open");
    return 1;
  }
  while (left > 0) {
    size_t n = left < (long)sizeof(buf) ? (size_t)left : sizeof(buf);
    ssize_t w = write(fd, buf, n);
    if (w <= 0) {
      perror("write_hold: write");
      return 1;
    }
    left -= w;
  }
  printf("WRITE_HOLD written\n");
  fflush(stdout);
  sleep((unsigned)secs);
  close(fd);
  return 0;
}
