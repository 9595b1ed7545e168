FROM python:3.11-slim
WORKDIR /app
ENV HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
COPY pyproject.toml README.md ./
COPY cairn ./cairn
COPY fixtures ./fixtures
COPY web ./web
RUN pip install --no-cache-dir -e .
EXPOSE 8000
CMD ["cairn", "serve"]
