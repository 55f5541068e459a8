package io.redlock;

import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
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

  /** One started with redis-server's `extraArgs` (such as `--requirepass`). */
  @SuppressWarnings("try") // the probe socket is only opened to see that the port answers
  static RedisServer start(String... extraArgs) throws IOException, InterruptedException {
    Path dir = Files.createTempDirectory("redlock-java-redis");
    int port = freePort();
    List<String> command =
        new ArrayList<>(
            List.of(
                "redis-server", "--port", String.valueOf(port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", dir.toString()));
    command.addAll(List.of(extraArgs));
    Process process =
        new ProcessBuilder(command)
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

  int port() {
    return port;
  }

  /** The server's process id (to stop it with a signal). */
  long pid() {
    return process.pid();
  }

  /** One command in RESP over a plain socket; the first line of the reply. */
  String command(String... args) throws IOException {
    return exchange(false, args);
  }

  /** One command; a bulk string reply in full (null when nil), any other its first line. */
  String reply(String... args) throws IOException {
    return exchange(true, args);
  }

  private String exchange(boolean wholeBulk, String... args) throws IOException {
    try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), port)) {
      socket.setSoTimeout(5000);
      StringBuilder request = new StringBuilder("*").append(args.length).append("\r\n");
      for (String arg : args) {
        request
            .append('$')
            .append(arg.getBytes(StandardCharsets.UTF_8).length)
            .append("\r\n")
            .append(arg)
            .append("\r\n");
      }
      OutputStream out = socket.getOutputStream();
      out.write(request.toString().getBytes(StandardCharsets.UTF_8));
      out.flush();
      InputStream in = new BufferedInputStream(socket.getInputStream());
      String first = readLine(in);
      if (first == null) {
        throw new IOException("redis-server closed the connection without a reply");
      }
      if (!wholeBulk || !first.startsWith("$")) {
        return first;
      }
      int length = Integer.parseInt(first.substring(1));
      if (length < 0) {
        return null;
      }
      byte[] body = in.readNBytes(length + 2);
      return new String(body, 0, length, StandardCharsets.UTF_8);
    }
  }

  /** One line of a reply without its CRLF; null at the end of the stream. */
  private static String readLine(InputStream in) throws IOException {
    StringBuilder line = new StringBuilder();
    int c;
    while ((c = in.read()) != -1) {
      if (c == '\r') {
        in.read();
        return line.toString();
      }
      line.append((char) c);
    }
    return line.length() == 0 ? null : line.toString();
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
