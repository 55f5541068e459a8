package io.redlock;

/** {@link DistributedReadWriteLock}: two {@link TokenLock} views of one name, one owner. */
final class TokenReadWriteLock implements DistributedReadWriteLock {
  private final String name;
  private final DistributedLock read;
  private final DistributedLock write;

  TokenReadWriteLock(String name, DistributedLock read, DistributedLock write) {
    this.name = name;
    this.read = read;
    this.write = write;
  }

  @Override
  public DistributedLock readLock() {
    return read;
  }

  @Override
  public DistributedLock writeLock() {
    return write;
  }

  @Override
  public String getName() {
    return name;
  }

  @Override
  public DistributedReadWriteLock withLabel(String label) {
    TokenLock.checkLabel(label);
    return new TokenReadWriteLock(name, read.withLabel(label), write.withLabel(label));
  }
}
