# incident-bot: one image for the bot (`serve`) and the extraction worker (`worker`).
#
#   docker build -t incident-bot .                                   # bot: CPU torch
#   docker build -t incident-bot-gpu \
#     --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu124 .   # worker: CUDA torch
#
# torch goes in first, from the index chosen above, so the project's `torch>=2.4,<3`
# is already satisfied and pip never resolves a different (multi-GB) build by itself.
FROM python:3.11-slim-bookworm

ARG TORCH_SPEC="torch>=2.4,<3"
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MPLBACKEND=Agg \
    MPLCONFIGDIR=/tmp/matplotlib

# tini reaps children and forwards SIGTERM (the worker forks one process per job)
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*

RUN pip install --index-url "${TORCH_INDEX_URL}" "${TORCH_SPEC}"

WORKDIR /app
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY playbooks ./playbooks
COPY storage ./storage
RUN pip install .

# never root: the bot holds Slack tokens and SSH keys, it does not need privileges
RUN useradd --system --uid 10001 --create-home --home-dir /home/bot bot \
 && mkdir -p /var/lib/incident-bot && chown bot /var/lib/incident-bot
USER bot
WORKDIR /var/lib/incident-bot

EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4).status != 200)"

ENTRYPOINT ["tini", "--", "incident-bot"]
CMD ["serve", "--config", "/etc/incident-bot/config.yaml"]
