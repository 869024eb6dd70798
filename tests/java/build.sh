#!/usr/bin/env bash
# Installs the Java Kafka client (tests/java/requirements.txt) and compiles tests/java/src into
# $JAVA_OUT (default target/java), idempotently: the wheel is fetched only when the pinned
# requirement changes, and javac runs only when a source file changed. Prints the classpath
# file's path. Needs java/javac >= 17 and a python3 with pip ($PYTHON).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
OUT=${JAVA_OUT:-$ROOT/target/java}
REQS=$ROOT/tests/java/requirements.txt
PYTHON=${PYTHON:-python3}
JARS=(kafka-clients lz4-java snappy-java zstd-jni slf4j-api)

command -v javac >/dev/null 2>&1 || { echo "tests/java: javac (JDK >= 17) is missing" >&2; exit 1; }
mkdir -p "$OUT/lib"

want=$(sha256sum "$REQS" | cut -d' ' -f1)
if [ "$(cat "$OUT/lib/.requirements.sha256" 2>/dev/null || true)" != "$want" ]; then
  rm -rf "$OUT/wheel" "$OUT/lib"/*.jar
  "$PYTHON" -m pip download -q --disable-pip-version-check --no-deps --require-hashes \
    -r "$REQS" -d "$OUT/wheel"
  wheel=("$OUT"/wheel/*.whl)
  "$PYTHON" - "${wheel[0]}" "$OUT/lib" "${JARS[@]}" <<'PY'
import os, shutil, sys, zipfile
wheel, dest, jars = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    for jar in jars:
        with z.open(f"pyflink/lib/{jar}.jar") as src, open(os.path.join(dest, f"{jar}.jar"), "wb") as out:
            shutil.copyfileobj(src, out)
PY
  rm -rf "$OUT/wheel" # 92 MB, of which the five jars are 19
  echo "$want" >"$OUT/lib/.requirements.sha256"
fi

classpath=$(printf "$OUT/lib/%s.jar:" "${JARS[@]}")
classpath=${classpath%:}
src_want=$( (cat "$OUT/lib/.requirements.sha256"; find tests/java/src -name '*.java' -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1)
if [ "$(cat "$OUT/classes/.sources.sha256" 2>/dev/null || true)" != "$src_want" ]; then
  # Compiled aside and swapped in, so a JVM started meanwhile never sees a half-written tree.
  fresh=$OUT/classes.new.$$
  rm -rf "$fresh"
  mkdir -p "$fresh"
  find tests/java/src -name '*.java' -print0 | xargs -0 javac -Xlint:all -Werror --release 17 \
    -cp "$classpath" -d "$fresh"
  echo "$src_want" >"$fresh/.sources.sha256"
  rm -rf "$OUT/classes.old"
  if [ -d "$OUT/classes" ]; then mv "$OUT/classes" "$OUT/classes.old"; fi
  mv "$fresh" "$OUT/classes"
  rm -rf "$OUT/classes.old"
fi
echo "$OUT/classes:$classpath" >"$OUT/classpath"
echo "$OUT/classpath"
