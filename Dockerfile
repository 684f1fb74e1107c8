# respqueue: a Redis-protocol server for BullMQ job queues, durable on SQLite.
#   docker build -t respqueue .
#   docker run -p 6379:6379 -v respqueue-data:/data respqueue
# Settings come from RESPQUEUE_* environment variables (see README.md and docs/BACKUPS.md).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY respqueue ./respqueue
COPY compat ./compat
COPY lua ./lua
# a C compiler for the build only: mypyc compiles the hot paths (respqueue/speedups.py), then it goes
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install . \
    && apt-get purge -y --auto-remove gcc libc6-dev && rm -rf /var/lib/apt/lists/* /src

WORKDIR /data
# Docker's port mapping makes every client non-loopback, which protected mode would refuse (as Redis's own
# image does, it is off here): set RESPQUEUE_REQUIREPASS or ACL users before exposing the port.
ENV RESPQUEUE_PROTECTED_MODE=no

VOLUME /data
EXPOSE 6379

# PING over a raw socket: the slim image has no redis-cli
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import socket; s = socket.create_connection(('127.0.0.1', 6379), 2); s.sendall(b'PING\\r\\n'); assert s.recv(64).startswith((b'+PONG', b'-NOAUTH'))"]

CMD ["respqueue", "serve", "--host", "0.0.0.0", "--dir", "/data"]
