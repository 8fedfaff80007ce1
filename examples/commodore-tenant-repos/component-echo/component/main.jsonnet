local kap = import 'lib/kapitan.libjsonnet';
local kube = import 'lib/kube.libjsonnet';
local inv = kap.inventory();
local params = inv.parameters.echo;

{
  '00_namespace': kube.Namespace(params.namespace),
  '10_deployment': kube.Deployment('echo') {
    metadata+: { namespace: params.namespace, labels+: params.labels },
    spec+: {
      replicas: params.replicas,
      template+: { spec+: { containers_+: {
        echo: kube.Container('echo') {
          image: params.image,
          args: ['-text=echo from %s in %s' % [inv.parameters.cluster.name, params.region]],
          env_+: { REGION: params.region },
        },
      } } },
    },
  },
}
