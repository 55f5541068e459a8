/* The throwaway redis-server of the C suite: a free loopback port, a temporary directory, no
 * persistence, killed at the end. Never a system service, never a fixed port. */
#define _POSIX_C_SOURCE 200809L

#include "harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t server_pid = 0;
static int server_port = 0;
static char server_dir[] = "/tmp/redlock-c-test-XXXXXX";
static char url[64];

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return ntohs(addr.sin_port);
}

static int connect_server(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)server_port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval timeout = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

bool redis_start(void) {
    const char *binary = getenv("REDIS_SERVER_BIN");
    if (!binary) binary = "redis-server";
    if (!mkdtemp(server_dir)) {
        perror("mkdtemp");
        return false;
    }
    server_port = free_port();
    if (server_port <= 0) return false;
    char port[16];
    snprintf(port, sizeof port, "%d", server_port);
    server_pid = fork();
    if (server_pid < 0) return false;
    if (server_pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) {
            dup2(devnull, STDOUT_FILENO);
            dup2(devnull, STDERR_FILENO);
        }
        execlp(binary, binary, "--port", port, "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", server_dir, (char *)NULL);
        _exit(127);
    }
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", server_port);
    for (int i = 0; i < 1000; i++) { /* up to 10 s */
        char reply[64];
        const char *ping[] = {"PING"};
        if (redis_command(reply, sizeof reply, 1, ping) && strstr(reply, "PONG")) return true;
        int status;
        if (waitpid(server_pid, &status, WNOHANG) == server_pid) {
            fprintf(stderr, "%s exited at start (is it installed? scripts/setup.sh)\n", binary);
            server_pid = 0;
            return false;
        }
        sleep_ms(10);
    }
    fprintf(stderr, "redis-server did not answer on port %d\n", server_port);
    redis_stop();
    return false;
}

void redis_stop(void) {
    if (server_pid > 0) {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, NULL, 0);
        server_pid = 0;
    }
    /* --save '' and --appendonly no: the directory holds nothing but may hold a stray file. */
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", server_dir);
    if (strncmp(server_dir, "/tmp/redlock-c-test-", 20) == 0 && system(command) != 0) {
        fprintf(stderr, "could not remove %s\n", server_dir);
    }
}

const char *redis_url(void) { return url; }

bool redis_command(char *reply, size_t cap, int argc, const char *const *argv) {
    char request[4096];
    size_t used = (size_t)snprintf(request, sizeof request, "*%d\r\n", argc);
    for (int i = 0; i < argc && used < sizeof request; i++) {
        used += (size_t)snprintf(request + used, sizeof request - used, "$%zu\r\n%s\r\n",
                                 strlen(argv[i]), argv[i]);
    }
    if (used >= sizeof request) return false;
    int fd = connect_server();
    if (fd < 0) return false;
    bool ok = write(fd, request, used) == (ssize_t)used;
    ssize_t got = ok ? read(fd, reply, cap - 1) : -1;
    close(fd);
    if (got <= 0) return false;
    reply[got] = '\0';
    return true;
}

long redis_key_count(const char *fragment) {
    char reply[64];
    const char *script[] = {"EVAL",
                            "local n = 0 for _, k in ipairs(redis.call('KEYS', '*')) do "
                            "if string.find(k, ARGV[1], 1, true) then n = n + 1 end end "
                            "return n",
                            "0", fragment};
    if (!redis_command(reply, sizeof reply, 4, script) || reply[0] != ':') return -1;
    return strtol(reply + 1, NULL, 10);
}
