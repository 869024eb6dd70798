//! The client listeners: bound before registration (the address a listener gets is the one
//! the broker registers, as Kafka's SocketServer binds its acceptors before the
//! BrokerLifecycleManager registers), given their TLS / SASL once the image exists, then
//! served.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use runnel_metadata::controller::RegisterBroker;
use runnel_metadata::MetadataImage;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::config::BrokerConfig;
use crate::context::Broker;
use crate::server::limits::ServerLimits;
use crate::server::listeners::Endpoint;
use crate::server::ListenerRuntime;
use crate::BrokerError;

/// Every listener bound, not yet accepting.
pub(super) struct BoundListeners {
    bound: Vec<(Endpoint, TcpListener, SocketAddr)>,
    /// Each listener's advertised (host, port), by listener name.
    pub advertised: BTreeMap<String, (String, u16)>,
    /// The inter-broker listener's bound address.
    pub listen_addr: SocketAddr,
    inter_broker: String,
}

/// Binds every listener of the plan (and sets the inter-broker dialing security).
pub(super) async fn bind(config: &BrokerConfig) -> Result<BoundListeners, BrokerError> {
    let plan = config.listener_plan()?;
    crate::inter_broker::set_security(config.inter_broker_security(&plan)?);
    let mut bound = Vec::new();
    let mut advertised = BTreeMap::new();
    for endpoint in &plan.listeners {
        let addr = endpoint.bind_addr().map_err(BrokerError::Config)?;
        let listener = TcpListener::bind(addr).await.map_err(|e| {
            BrokerError::Startup(format!("cannot listen on {addr} ({}): {e}", endpoint.name))
        })?;
        let local = listener.local_addr()?;
        advertised.insert(
            endpoint.name.clone(),
            crate::listener_config::advertised_endpoint(&plan, &endpoint.name, local),
        );
        bound.push((endpoint.clone(), listener, local));
    }
    // The inter-broker listener's address is the one registered (what other brokers dial).
    let listen_addr = bound
        .iter()
        .find(|(e, _, _)| e.name == plan.inter_broker)
        .map(|(_, _, local)| *local)
        .ok_or_else(|| BrokerError::Config("no inter-broker listener".into()))?;
    Ok(BoundListeners {
        bound,
        advertised,
        listen_addr,
        inter_broker: plan.inter_broker,
    })
}

impl BoundListeners {
    /// This broker's registration. Every listener is registered, so a client of any listener
    /// is told every broker's endpoint on that listener (Kafka's
    /// BrokerRegistrationRecord.EndPoints).
    pub fn registration(&self, config: &BrokerConfig) -> RegisterBroker {
        let (host, port) = self
            .advertised
            .get(&self.inter_broker)
            .cloned()
            .unwrap_or((self.listen_addr.ip().to_string(), self.listen_addr.port()));
        RegisterBroker {
            broker_id: config.node_id,
            incarnation_id: Uuid::new_v4(),
            host,
            port,
            rack: config.rack(),
            endpoints: self
                .bound
                .iter()
                .filter_map(|(e, _, _)| {
                    let (host, port) = self.advertised.get(&e.name)?.clone();
                    Some(runnel_metadata::BrokerEndpoint {
                        name: e.name.clone(),
                        host,
                        port,
                        security_protocol: e.protocol.id(),
                    })
                })
                .collect(),
        }
    }

    /// Every listener's name and bound address.
    pub fn addresses(&self) -> Vec<(String, SocketAddr)> {
        self.bound
            .iter()
            .map(|(e, _, local)| (e.name.clone(), *local))
            .collect()
    }

    /// Gives each listener its TLS and SASL (SCRAM credentials come from the image).
    pub fn with_runtimes(
        self,
        config: &BrokerConfig,
        image: &watch::Receiver<Arc<MetadataImage>>,
    ) -> Result<ReadyListeners, BrokerError> {
        let mut ready = Vec::new();
        for (endpoint, listener, _) in self.bound {
            let runtime = config.listener_runtime(&endpoint, image)?;
            ready.push((listener, Arc::new(runtime)));
        }
        Ok(ReadyListeners(ready))
    }
}

/// Listeners with their TLS and SASL, ready to serve.
pub(super) struct ReadyListeners(Vec<(TcpListener, Arc<ListenerRuntime>)>);

impl ReadyListeners {
    /// Runs one `server::serve` per listener (the connection limits are per listener); the
    /// task returned ends once every listener stopped.
    pub fn serve(
        self,
        broker: &Arc<Broker>,
        limits: &ServerLimits,
        shutdown: &watch::Receiver<bool>,
    ) -> JoinHandle<()> {
        let servers: Vec<_> = self
            .0
            .into_iter()
            .map(|(listener, runtime)| {
                tokio::spawn(crate::server::serve(
                    listener,
                    runtime,
                    broker.clone(),
                    limits.clone(),
                    shutdown.clone(),
                ))
            })
            .collect();
        tokio::spawn(async move {
            for s in servers {
                let _ = s.await;
            }
        })
    }
}
