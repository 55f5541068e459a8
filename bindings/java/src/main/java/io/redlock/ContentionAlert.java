package io.redlock;

import java.time.Duration;
import java.util.List;

/**
 * A waiter passed the client's contention threshold (the dead-lock alert of seed 000).
 *
 * @param name the lock name
 * @param mode the view the waiter asked for
 * @param ownerToken the waiting owner
 * @param waited how long it has waited so far
 * @param failedAttempts attempts that found the lock taken
 * @param holders the current holders, each as "token xCOUNT (mode) thread T on HOST pid P, held N ms"
 */
public record ContentionAlert(
    String name,
    LockMode mode,
    String ownerToken,
    Duration waited,
    long failedAttempts,
    List<String> holders) {}
