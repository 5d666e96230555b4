"""A stand-in kubelet for tests/pod_resources.rs: the real gRPC server of
PyPI's grpcio serving the pod-resources API's `List` (v1) on a unix socket,
its answer encoded by PyPI's protobuf from the messages of the kubelet's
staging/src/k8s.io/kubelet/pkg/apis/podresources/v1/api.proto (declared
here field by field, with the newer fields cpu_ids and topology too, which
gputaskman does not read and must skip).

Usage: fake_kubelet.py SOCKET ALLOCATIONS.json
ALLOCATIONS.json, read again at every call: a list of
{"namespace", "name", "containers": [{"name", "devices": [{"resource_name",
"device_ids": [...]}]}]}. The file holding {"fail": "message"} makes the
call fail with status UNAVAILABLE and that message. Prints "ready" when
it serves.
"""
import json
import sys
from concurrent import futures

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto


def messages():
    file = descriptor_pb2.FileDescriptorProto(name="podresources_v1.proto", package="v1", syntax="proto3")

    def message(name, fields):
        m = file.message_type.add(name=name)
        for number, (field, kind, repeated, type_name) in enumerate(fields, start=1):
            f = m.field.add(name=field, number=number, type=kind,
                            label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
            if type_name:
                f.type_name = ".v1." + type_name

    message("ListPodResourcesRequest", [])
    message("NUMANode", [("ID", F.TYPE_INT64, False, None)])
    message("TopologyInfo", [("nodes", F.TYPE_MESSAGE, True, "NUMANode")])
    message("ContainerDevices", [("resource_name", F.TYPE_STRING, False, None),
                                 ("device_ids", F.TYPE_STRING, True, None),
                                 ("topology", F.TYPE_MESSAGE, False, "TopologyInfo")])
    message("ContainerResources", [("name", F.TYPE_STRING, False, None),
                                   ("devices", F.TYPE_MESSAGE, True, "ContainerDevices"),
                                   ("cpu_ids", F.TYPE_INT64, True, None)])
    message("PodResources", [("name", F.TYPE_STRING, False, None),
                             ("namespace", F.TYPE_STRING, False, None),
                             ("containers", F.TYPE_MESSAGE, True, "ContainerResources")])
    message("ListPodResourcesResponse", [("pod_resources", F.TYPE_MESSAGE, True, "PodResources")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    get = lambda n: message_factory.GetMessageClass(pool.FindMessageTypeByName("v1." + n))
    return get("ListPodResourcesRequest"), get("ListPodResourcesResponse")


def main():
    socket, allocations = sys.argv[1], sys.argv[2]
    request_type, response_type = messages()

    def list_pods(request, context):
        with open(allocations) as f:
            wanted = json.load(f)
        if isinstance(wanted, dict) and "fail" in wanted:
            context.abort(grpc.StatusCode.UNAVAILABLE, wanted["fail"])
        answer = response_type()
        for pod in wanted:
            p = answer.pod_resources.add(name=pod["name"], namespace=pod["namespace"])
            for container in pod["containers"]:
                c = p.containers.add(name=container["name"], cpu_ids=[2, 3])
                for devices in container["devices"]:
                    d = c.devices.add(resource_name=devices["resource_name"], device_ids=devices["device_ids"])
                    d.topology.nodes.add(ID=0)
        return answer

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    handler = grpc.method_handlers_generic_handler("v1.PodResourcesLister", {
        "List": grpc.unary_unary_rpc_method_handler(
            list_pods, request_deserializer=request_type.FromString,
            response_serializer=response_type.SerializeToString),
    })
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port("unix:" + socket)
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
