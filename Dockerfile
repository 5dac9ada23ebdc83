# Stepwise dashboard image. CPU by default (torch 2.13.0 from the CPU wheel index); for GPUs see
# docs/how-to/install-into-your-env.md, "Docker".
#   docker build -t stepwise .
#   docker run --rm -p 127.0.0.1:8501:8501 -v stepwise-runs:/data stepwise
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

# The torch wheel index: CPU by default; https://download.pytorch.org/whl/cu128 (or another CUDA index) for GPUs.
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ENV DEBIAN_FRONTEND=noninteractive PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 STEPWISE_HOME=/data/runs STREAMLIT_BROWSER_GATHER_USAGE_STATS=false

# A CUDA base image (nvidia/cuda:*) has no Python: install the distribution's python3 and venv when missing.
RUN if ! command -v python3 >/dev/null 2>&1 || ! python3 -c "import venv, ensurepip" >/dev/null 2>&1; then \
        apt-get update && apt-get install -y --no-install-recommends python3 python3-venv python3-pip \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /opt/stepwise
# Dependencies first (a layer that survives source changes): torch from the chosen index, then pyproject.toml's
# dependencies with the dashboard extra, all through constraints.txt (docs/how-to/install-into-your-env.md).
COPY pyproject.toml constraints.txt scripts/requirements.py ./
RUN pip install --upgrade pip \
    && pip install --index-url "${TORCH_INDEX}" -c constraints.txt torch \
    && python requirements.py dashboard > /tmp/requirements.txt \
    && pip install -c constraints.txt -r /tmp/requirements.txt

# Stepwise itself, installed as a user installs it (the `stepwise` command; its packages under stepwise/_lib).
COPY . .
RUN pip install --no-deps -c constraints.txt . \
    && useradd --create-home --uid 1000 stepwise \
    && mkdir -p /data/runs && chown -R stepwise:stepwise /data

USER stepwise
VOLUME ["/data"]
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"
# Inside the container the server must listen on all interfaces to be reachable through -p; publish the port on
# the host's loopback (-p 127.0.0.1:8501:8501) to keep it local. Everything else comes from .streamlit/config.toml.
CMD ["stepwise", "dashboard", "--server.address", "0.0.0.0", "--server.port", "8501"]
