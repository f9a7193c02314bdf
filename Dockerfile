# The laggard image: the CLI, the Faust worker, the replayers and the adapters (no Java: brokers run elsewhere).
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /opt/laggard
COPY requirements.lock pyproject.toml README.md ./
RUN pip install -r requirements.lock
COPY schemas schemas
COPY streams streams
COPY producers producers
COPY adapters adapters
COPY laggard laggard
COPY scripts scripts
RUN pip install --no-deps . && useradd --create-home --uid 10001 laggard
USER laggard
# Faust's local state; tables are rebuilt from their changelog topics, so it need not persist.
ENV LAGGARD_DATA_DIR=/tmp/laggard
ENTRYPOINT ["laggard"]
CMD ["--help"]
