// Package deploy holds only tests: TestCompose builds coord's image from this
// checkout (Dockerfile, deploy/build-image.sh), starts the docker-compose.yml
// cluster under a project name of its own and injects container faults
// (docker kill, docker network disconnect, a rolling upgrade under load). It
// is skipped when Docker or docker-compose is missing. See docs/deploy.md.
package deploy
