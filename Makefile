# The compose cluster (docs/deploy.md). `make up` builds the image from this
# checkout (static binaries on the host, an image FROM scratch: no registry)
# and starts 3 voters and 1 observer; `make down` stops them and keeps the
# data, `make clean` removes containers, network and volumes.
COMPOSE ?= $(shell command -v docker-compose >/dev/null 2>&1 && echo docker-compose || echo docker compose)
IMAGE ?= coord:local
VERSION ?= dev
export COORD_IMAGE = $(IMAGE)

.PHONY: image up down clean ps logs health upgrade test-compose

image:
	deploy/build-image.sh $(IMAGE) $(VERSION)

up: image
	deploy/keygen.sh
	$(COMPOSE) up -d
	deploy/wait-healthy.sh

down:
	$(COMPOSE) down

clean:
	$(COMPOSE) down -v --remove-orphans

ps:
	$(COMPOSE) ps

logs:
	$(COMPOSE) logs --tail=100

health:
	deploy/wait-healthy.sh

# Rolling upgrade to a new build of this checkout: make upgrade VERSION=v2
upgrade: image
	deploy/rolling-upgrade.sh

test-compose:
	go test -count=1 -v -timeout 10m ./deploy/
