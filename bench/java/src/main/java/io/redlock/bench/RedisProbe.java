package io.redlock.bench;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;

/**
 * A raw RESP connection to the bench's redis-server, independent of both libraries: the PING
 * round trip, and a MONITOR that counts the commands sent by clients.
 */
final class RedisProbe implements AutoCloseable {
  private final Socket socket;
  private final OutputStream out;
  private final BufferedReader in;

  RedisProbe(String url) throws IOException {
    URI uri = URI.create(url);
    if (!"redis".equals(uri.getScheme())) {
      throw new IllegalArgumentException("only redis:// URLs are supported, got " + url);
    }
    socket = new Socket(uri.getHost(), uri.getPort() == -1 ? 6379 : uri.getPort());
    socket.setTcpNoDelay(true);
    out = socket.getOutputStream();
    in =
        new BufferedReader(
            new InputStreamReader(socket.getInputStream(), StandardCharsets.ISO_8859_1), 1 << 16);
    String userInfo = uri.getRawUserInfo();
    if (userInfo != null && !userInfo.isEmpty()) {
      int colon = userInfo.indexOf(':');
      String reply =
          colon < 0
              ? call("AUTH", decode(userInfo))
              : colon == 0
                  ? call("AUTH", decode(userInfo.substring(1)))
                  : call(
                      "AUTH",
                      decode(userInfo.substring(0, colon)),
                      decode(userInfo.substring(colon + 1)));
      if (!reply.startsWith("+OK")) {
        throw new IOException("AUTH failed: " + reply);
      }
    }
  }

  private static String decode(String s) {
    return URLDecoder.decode(s, StandardCharsets.UTF_8);
  }

  /** Sends one command and returns the first line of the reply (enough for simple replies). */
  String call(String... args) throws IOException {
    send(args);
    String reply = in.readLine();
    if (reply == null) {
      throw new IOException("redis closed the connection");
    }
    if (reply.startsWith("$") && !reply.equals("$-1")) {
      reply = in.readLine();
    }
    return reply;
  }

  private void send(String... args) throws IOException {
    StringBuilder command = new StringBuilder().append('*').append(args.length).append("\r\n");
    for (String arg : args) {
      byte[] bytes = arg.getBytes(StandardCharsets.UTF_8);
      command.append('$').append(bytes.length).append("\r\n").append(arg).append("\r\n");
    }
    out.write(command.toString().getBytes(StandardCharsets.UTF_8));
    out.flush();
  }

  /** {@code count} PING round trips (after a few unrecorded ones), in ns. */
  double[] pings(int count) throws IOException {
    for (int i = 0; i < 20; i++) {
      ping();
    }
    double[] rtt = new double[count];
    for (int i = 0; i < count; i++) {
      long started = System.nanoTime();
      ping();
      rtt[i] = System.nanoTime() - started;
    }
    return rtt;
  }

  private void ping() throws IOException {
    String reply = call("PING");
    if (!"+PONG".equals(reply)) {
      throw new IOException("PING answered " + reply);
    }
  }

  @Override
  public void close() throws IOException {
    socket.close();
  }

  /**
   * MONITOR on its own connection: counts the commands that clients send (round trips) apart
   * from those run inside scripts (marked {@code lua]}), until {@link #stop} sends an ECHO marker
   * (not counted).
   */
  static final class Monitor {
    private final String url;
    private final RedisProbe probe;
    private final String marker = "bench-monitor-end-" + UUID.randomUUID();
    private final Thread reader;
    private final Map<String, Integer> sentByCommand = new TreeMap<>();
    private long sent;
    private long scripted;
    private volatile boolean ended;
    private volatile Exception failure;

    Monitor(String url) throws IOException {
      this.url = url;
      this.probe = new RedisProbe(url);
      String reply = probe.call("MONITOR");
      if (!reply.startsWith("+OK")) {
        throw new IOException("MONITOR answered " + reply);
      }
      reader = new Thread(this::read, "bench-monitor");
      reader.setDaemon(true);
      reader.start();
    }

    private void read() {
      try {
        String line;
        while ((line = probe.in.readLine()) != null) {
          if (line.contains(marker)) {
            ended = true;
            return;
          }
          if (line.contains(" lua] ")) {
            scripted++;
          } else {
            sent++;
            sentByCommand.merge(commandName(line), 1, Integer::sum);
          }
        }
      } catch (IOException e) {
        failure = e;
      }
    }

    /** {@code +1700000000.123456 [0 127.0.0.1:5555] "evalsha" "..."} -> {@code evalsha}. */
    private static String commandName(String line) {
      int start = line.indexOf("] \"");
      if (start < 0) {
        return "?";
      }
      int end = line.indexOf('"', start + 3);
      return end < 0 ? "?" : line.substring(start + 3, end).toLowerCase(java.util.Locale.ROOT);
    }

    /** Sends the marker and waits until the reader has seen everything before it. */
    void stop() throws Exception {
      try (RedisProbe marking = new RedisProbe(url)) {
        marking.call("ECHO", marker);
      }
      reader.join(120_000);
      probe.close();
      if (failure != null) {
        throw failure;
      }
      if (!ended) {
        throw new IllegalStateException("MONITOR never showed the end marker");
      }
    }

    long sent() {
      return sent;
    }

    long scripted() {
      return scripted;
    }

    Map<String, Integer> sentByCommand() {
      return sentByCommand;
    }
  }
}
