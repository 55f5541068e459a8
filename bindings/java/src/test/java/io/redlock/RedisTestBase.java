package io.redlock;

import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Timeout;

/** One throwaway redis-server per test class; clients made by a test are closed after it. */
@Timeout(30)
abstract class RedisTestBase {
  static RedisServer redis;
  private final List<RedlockClient> clients = new ArrayList<>();

  @BeforeAll
  static void startRedis() throws Exception {
    redis = RedisServer.start();
  }

  @AfterAll
  static void stopRedis() throws Exception {
    redis.close();
  }

  @AfterEach
  void closeClients() {
    clients.forEach(RedlockClient::close);
    clients.clear();
  }

  RedlockClient client() {
    return track(RedlockClient.connect(redis.url()));
  }

  RedlockClient track(RedlockClient client) {
    clients.add(client);
    return client;
  }

  /** A lock name no other test uses. */
  static String uniqueName() {
    return "test:" + UUID.randomUUID();
  }
}
