# One image for every ibpool service (exporters, recommender): `ibpool <command>`.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY . .
RUN pip install . \
    && useradd --system --home-dir /var/lib/ibpool --create-home ibpool

USER ibpool
WORKDIR /var/lib/ibpool
ENTRYPOINT ["ibpool"]
CMD ["--help"]
