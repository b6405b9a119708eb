# onewell in a container: builds the C core from this source tree (gcc only) and runs `onewell serve`.
#
#   docker build -t onewell .
#   docker run --rm -p 8080:8080 -v onewell-models:/models onewell                       # one engine
#   docker run --rm -p 8080:8080 -v onewell-models:/models --shm-size=1g onewell \
#       qwen2.5-coder-0.5b-instruct --replicas 2 --threads 4                               # Ray, 2 replicas
#
# Arguments after the image name replace CMD (the model and any `onewell serve` option); the API key
# comes from $ONEWELL_API_KEY (-e ONEWELL_API_KEY=...). Models are pulled into /models on first use:
# keep that volume to pull once. Ray wants a larger /dev/shm than Docker's 64 MB (--shm-size).
FROM python:3.11-slim

RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY src ./src
# EXTRAS=serve for a smaller image without Ray (then --replicas is refused with a clear message)
ARG EXTRAS=ray
RUN pip install --no-cache-dir ".[${EXTRAS}]" && rm -rf build

ENV ONEWELL_HOME=/models
VOLUME /models
EXPOSE 8080
ENTRYPOINT ["onewell", "serve", "--host", "0.0.0.0", "--port", "8080"]
CMD ["smollm2-135m-instruct"]
