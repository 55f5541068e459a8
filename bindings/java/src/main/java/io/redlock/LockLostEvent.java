package io.redlock;

/**
 * A hold this client's watchdog kept alive is gone from Redis (force-unlocked, or expired while
 * Redis was unreachable).
 *
 * @param name the lock name
 * @param mode the view the hold was in
 * @param ownerToken the owner that lost it
 */
public record LockLostEvent(String name, LockMode mode, String ownerToken) {}
