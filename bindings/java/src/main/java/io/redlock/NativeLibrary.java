package io.redlock;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Locale;

/**
 * Loads libredlock once per class loader, like sqlite-jdbc: the copy bundled in the jar is
 * extracted to a temporary file and loaded from there, so a Maven user needs nothing else.
 *
 * <p>Overrides, in order: {@code -Dredlock.library=/path/to/libredlock.so} loads that file; a
 * {@code libredlock} in a directory of {@code java.library.path} (or {@code
 * -Dredlock.useLibraryPath=true}) is loaded from there. Without a bundled copy for this platform,
 * {@code java.library.path} is tried as well.
 */
final class NativeLibrary {
  static final String FILE_PROPERTY = "redlock.library";
  static final String USE_LIBRARY_PATH_PROPERTY = "redlock.useLibraryPath";

  private NativeLibrary() {}

  static synchronized void load() {
    String file = System.getProperty(FILE_PROPERTY);
    if (file != null && !file.isEmpty()) {
      System.load(Path.of(file).toAbsolutePath().toString());
      return;
    }
    if (Boolean.getBoolean(USE_LIBRARY_PATH_PROPERTY) || onLibraryPath()) {
      System.loadLibrary("redlock");
      return;
    }
    String resource = "/native/" + platform() + "/" + System.mapLibraryName("redlock");
    try (InputStream bundled = NativeLibrary.class.getResourceAsStream(resource)) {
      if (bundled == null) {
        loadFromLibraryPath(resource);
        return;
      }
      Path dir = null;
      Path copy = null;
      try {
        dir = Files.createTempDirectory("redlock-native");
        copy = dir.resolve(System.mapLibraryName("redlock"));
        Files.copy(bundled, copy, StandardCopyOption.REPLACE_EXISTING);
        System.load(copy.toString());
      } catch (IOException | UnsatisfiedLinkError e) {
        UnsatisfiedLinkError error =
            new UnsatisfiedLinkError(
                "cannot load the libredlock bundled in the jar ("
                    + resource
                    + ") from a copy in java.io.tmpdir="
                    + System.getProperty("java.io.tmpdir")
                    + ": "
                    + e.getMessage()
                    + ". A temporary directory that is not writable or is mounted noexec needs"
                    + " -Djava.io.tmpdir=<a writable directory that allows executables>, or -D"
                    + FILE_PROPERTY
                    + "=/path/to/libredlock.so, or libredlock on java.library.path");
        error.initCause(e);
        throw error;
      } finally {
        // Loaded or not, the copy is no longer needed once System.load returned (Linux, macOS);
        // where a loaded file cannot be deleted, it goes at exit.
        removeCopy(copy, dir);
      }
    } catch (IOException e) { // closing the resource stream
      throw new UnsatisfiedLinkError("cannot read " + resource + ": " + e);
    }
  }

  /** Deletes the extracted copy and its directory; what cannot go now goes at exit. */
  private static void removeCopy(Path copy, Path dir) {
    try {
      if (copy != null) {
        Files.deleteIfExists(copy);
      }
      if (dir != null) {
        Files.deleteIfExists(dir);
      }
    } catch (IOException e) {
      // deleteOnExit deletes in reverse order of registration: the file, then its directory.
      if (dir != null) {
        dir.toFile().deleteOnExit();
      }
      if (copy != null) {
        copy.toFile().deleteOnExit();
      }
    }
  }

  /** Whether a directory of {@code java.library.path} holds libredlock. */
  private static boolean onLibraryPath() {
    String path = System.getProperty("java.library.path", "");
    String file = System.mapLibraryName("redlock");
    for (String dir : path.split(java.io.File.pathSeparator)) {
      if (!dir.isEmpty() && Files.isRegularFile(Path.of(dir, file))) {
        return true;
      }
    }
    return false;
  }

  private static void loadFromLibraryPath(String resource) {
    try {
      System.loadLibrary("redlock");
    } catch (UnsatisfiedLinkError e) {
      UnsatisfiedLinkError error =
          new UnsatisfiedLinkError(
              "libredlock is not bundled for "
                  + platform()
                  + " (no "
                  + resource
                  + " in the jar) and not on java.library.path; set -D"
                  + FILE_PROPERTY
                  + "=/path/to/libredlock.so");
      error.initCause(e);
      throw error;
    }
  }

  /** The resource directory of this platform, e.g. {@code linux-x86_64}. */
  static String platform() {
    String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
    String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
    String osPart = os.contains("linux") ? "linux" : os.contains("mac") ? "macos" : os.replace(' ', '_');
    String archPart =
        switch (arch) {
          case "amd64", "x86_64" -> "x86_64";
          case "aarch64", "arm64" -> "aarch64";
          default -> arch;
        };
    return osPart + "-" + archPart;
  }
}
