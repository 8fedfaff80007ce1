local kap = import 'lib/kapitan.libjsonnet';
local kube = import 'lib/kube.libjsonnet';
local inv = kap.inventory();
local params = inv.parameters.greeting;

{
  '00_namespace': kube.Namespace(params.namespace),
  '10_configmap': kube.ConfigMap('greeting') {
    metadata+: { namespace: params.namespace },
    data: { text: params.text, cluster: inv.parameters.cluster.display_name },
  },
  [if params.password != '' then '20_secret']: kube.Secret('greeting') {
    metadata+: { namespace: params.namespace },
    stringData: { password: params.password },
  },
}
