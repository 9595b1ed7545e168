FROM python:3.11-slim
WORKDIR /app
ENV HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
COPY pyproject.toml README.md ./
COPY cairn ./cairn
COPY fixtures ./fixtures
COPY web ./web
# The CPU build of torch: the default wheel carries CUDA libraries (gigabytes) the service never uses.
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
RUN pip install --no-cache-dir --extra-index-url "$TORCH_INDEX" -e .
EXPOSE 8000
CMD ["cairn", "serve"]
