# One image for every ibpool service (the simulated cluster, the recommender): `ibpool <command>`.
# It holds Python and ibpool only: no InfiniBand diagnostics (ibnetdiscover, perfquery), no Slurm client
# (sinfo, squeue, scontrol), no munge and no GPU access (no NVIDIA driver library or devices). The real
# node, fabric and scheduler exporters run natively on their hosts (deploy/systemd, docs/deploy.md).
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
