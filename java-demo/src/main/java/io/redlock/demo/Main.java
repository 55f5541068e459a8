package io.redlock.demo;

/** Runs the three seed scenarios against the Redis at args[0]. */
public final class Main {
  private Main() {}

  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: Main redis://127.0.0.1:PORT");
      System.exit(2);
    }
    String url = args[0];
    System.out.println("== seed 000: read/write lock, unlock on another instance, dead-lock alert");
    Seed000ReadWrite.run(url);
    System.out.println("== seed 001: the pitfalls of SETNX locks, and what this lock does instead");
    Seed001Pitfalls.run(url);
    System.out.println("== seed 002: 5 JVM processes x 5 threads take keys from one counter");
    Seed002KeyGenerator.run(url);
    System.out.println("== all seed scenarios passed");
  }

  static void check(boolean condition, String what) {
    if (!condition) {
      throw new IllegalStateException("demo check failed: " + what);
    }
    System.out.println("   ok: " + what);
  }
}
