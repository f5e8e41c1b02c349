"""Serves one request through SageMaker's PyTorch inference toolkit, as the inference DLC's
TorchServe worker does: ``HandlerService().initialize(context)``, then ``handle``.

Run as ``python serve_probe.py MODEL_DIR CONTENT_TYPE ACCEPT`` with the request body on
stdin and ``MODEL_DIR/code`` first on PYTHONPATH (the toolkit's start-up sets it so).
Prints JSON: the response, its content type, the status the toolkit set (None: 200), and
where the runtime was imported from. Only TorchServe's context object is a stand-in: it
cannot run here (it needs Java and a model archive of its own).
"""

import json
import sys


class _Request:
    def __init__(self, headers):
        self.headers = headers

    def get_request_properties(self):
        return self.headers


class _Context:
    """TorchServe's ``ts.context.Context``: the parts the toolkit reads and sets."""

    def __init__(self, model_dir, headers):
        # TorchServe's context carries the model's name; a toolkit build seen here logs it on an
        # error.
        self.model_name = "model"
        self.system_properties = {"model_dir": model_dir, "gpu_id": None}
        self.request_processor = [_Request(headers)]
        self.content_type = None
        self.status = None

    def set_response_content_type(self, index, content_type):
        self.content_type = content_type

    def set_response_status(self, code=200, phrase=""):
        self.status = [code, phrase]


def main(model_dir, content_type, accept):
    from sagemaker_pytorch_serving_container.handler_service import HandlerService

    context = _Context(model_dir, {"Content-Type": content_type, "Accept": accept})
    service = HandlerService()
    service.initialize(context)
    (response,) = service.handle([{"body": sys.stdin.buffer.read()}], context)
    import compiled_training_runtime

    print(json.dumps({"response": response if isinstance(response, str) else
                      response.decode() if isinstance(response, bytes) else str(response),
                      "content_type": context.content_type, "status": context.status,
                      "runtime": compiled_training_runtime.__file__}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
