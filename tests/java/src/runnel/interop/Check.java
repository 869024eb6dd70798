package runnel.interop;

import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;

/** Assertions that fail the scenario with a message, and condition waits with a deadline. */
final class Check {
    private Check() {}

    static final class Failure extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Failure(String message) {
            super(message);
        }
    }

    static void that(boolean condition, String message) {
        if (!condition) {
            throw new Failure(message);
        }
    }

    static void equal(Object expected, Object actual, String what) {
        if (!Objects.equals(expected, actual)) {
            throw new Failure(what + ": expected " + expected + ", got " + actual);
        }
    }

    /** Polls {@code probe} until it returns a non-null, non-false value; exceptions count as "not yet". */
    static <T> T waitFor(String what, Duration timeout, Callable<T> probe) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        Object last = null;
        while (true) {
            try {
                T value = probe.call();
                if (value != null && !Boolean.FALSE.equals(value)) {
                    return value;
                }
                last = value;
            } catch (InterruptedException e) {
                throw e;
            } catch (Exception e) {
                last = e;
            }
            if (System.nanoTime() > deadline) {
                throw new Failure("timed out after " + timeout + " waiting for " + what + "; last: " + last);
            }
            Thread.sleep(50);
        }
    }

    /** The cause of a failed future, checked to be of {@code type}. */
    static <E extends Throwable> E failsWith(Class<E> type, String what, Callable<?> call) throws Exception {
        try {
            Object result = call.call();
            throw new Failure(what + ": expected " + type.getSimpleName() + ", but it succeeded with " + result);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (type.isInstance(cause)) {
                return type.cast(cause);
            }
            throw new Failure(what + ": expected " + type.getSimpleName() + ", got " + cause);
        }
    }
}
