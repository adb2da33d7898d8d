"""Any sandbox as an OpenEnv environment: the server (`python -m sandboxes.serve`), its client
(`sandboxes.serve.client.connect`) and the environment adapter they share
(`sandboxes.serve.environment`). Nothing is imported here, so using one part loads only its own."""
