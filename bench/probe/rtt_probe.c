/* PING round trips on one plain socket, the least any client can do on this machine: a thread
 * that sleeps in read() (as our blocking callers do) and one that sleeps in epoll_wait() first
 * (as event loops do). Run it on an idle machine and again while something keeps the cores busy:
 * on a small VM the round trip is mostly how long a sleeping vCPU takes to wake (see
 * docs/benchmarks.md).
 *
 *   cc -O2 -o rtt_probe bench/probe/rtt_probe.c && ./rtt_probe PORT [PINGS]
 */
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* One series of PINGs; with use_epoll, each reply is awaited in epoll_wait before read. */
static int series(int sock, int epoll, int use_epoll, long *rtt, int pings) {
    char reply[64];
    for (int i = 0; i < pings; i++) {
        long started = now_ns();
        if (write(sock, "PING\r\n", 6) != 6) return -1;
        if (use_epoll) {
            struct epoll_event ready;
            if (epoll_wait(epoll, &ready, 1, 5000) != 1) return -1;
        }
        if (read(sock, reply, sizeof reply) != 7) return -1; /* "+PONG\r\n" */
        rtt[i] = now_ns() - started;
    }
    qsort(rtt, pings, sizeof *rtt, by_value);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PORT [PINGS]\n", argv[0]);
        return 2;
    }
    int pings = argc > 2 ? atoi(argv[2]) : 2000;
    if (pings < 10) pings = 10;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int sock = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (sock < 0 || connect(sock, (struct sockaddr *)&addr, sizeof addr) != 0) {
        perror("connect");
        return 1;
    }
    setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int epoll = epoll_create1(0);
    struct epoll_event interest = {.events = EPOLLIN};
    epoll_ctl(epoll, EPOLL_CTL_ADD, sock, &interest);
    long *rtt = malloc(sizeof *rtt * pings);
    const char *names[] = {"read()", "epoll_wait()"};
    for (int use_epoll = 0; use_epoll < 2; use_epoll++) {
        if (!rtt || series(sock, epoll, use_epoll, rtt, pings) != 0) {
            fprintf(stderr, "PING failed\n");
            return 1;
        }
        printf("sleeping in %-13s PING p50 %4ld us  p90 %4ld us  (%d pings)\n", names[use_epoll],
               rtt[pings / 2] / 1000, rtt[pings * 9 / 10] / 1000, pings);
    }
    return 0;
}
