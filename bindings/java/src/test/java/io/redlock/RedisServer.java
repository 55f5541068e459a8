package io.redlock;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A throwaway redis-server on a free loopback port, with its files in a temporary directory;
 * never a system service.
 */
final class RedisServer implements AutoCloseable {
  private final Process process;
  private final Path dir;
  private final int port;

  private RedisServer(Process process, Path dir, int port) {
    this.process = process;
    this.dir = dir;
    this.port = port;
  }

  @SuppressWarnings("try") // the probe socket is only opened to see that the port answers
  static RedisServer start() throws IOException, InterruptedException {
    Path dir = Files.createTempDirectory("redlock-java-redis");
    int port = freePort();
    Process process =
        new ProcessBuilder(
                "redis-server", "--port", String.valueOf(port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", dir.toString())
            .redirectErrorStream(true)
            .redirectOutput(dir.resolve("redis.log").toFile())
            .start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (System.nanoTime() < deadline) {
      try (Socket ignored = new Socket(InetAddress.getLoopbackAddress(), port)) {
        return new RedisServer(process, dir, port);
      } catch (IOException notYet) {
        if (!process.isAlive()) {
          break;
        }
        Thread.sleep(20);
      }
    }
    process.destroyForcibly();
    throw new IOException("redis-server did not start: " + Files.readString(dir.resolve("redis.log")));
  }

  String url() {
    return "redis://127.0.0.1:" + port;
  }

  private static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    }
  }

  @Override
  public void close() throws IOException {
    process.destroyForcibly();
    try {
      process.waitFor(10, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    try (Stream<Path> files = Files.walk(dir)) {
      files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }
}
