"""Generated stubs of toolpdp.v1 (run ../../gen): toolpdp_pb2, toolpdp_pb2_grpc."""
