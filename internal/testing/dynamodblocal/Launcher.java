// Launcher runs DynamoDB Local on 127.0.0.1, on a port the kernel picks, as
// the package's StartContext runs it: in Java's source-file mode, with
// DynamoDBLocal.jar on the class path, and DynamoDB Local's own command-line
// options as arguments.
//
// DynamoDB Local has no option for the address it binds to (it listens on
// every interface) and takes a port number from 1 to 65535. Launcher builds
// the server as DynamoDB Local's main would, then sets the address and port
// 0 on its Jetty connector before starting it, and prints
// "listening <port>" once the port accepts connections. (The configuration
// DynamoDB Local prints before says port 8000, its default.)
//
// It exits when its standard input closes, that is, when the Go process that
// started it ends, however it ends.

import com.amazonaws.services.dynamodbv2.local.main.ServerRunner;
import com.amazonaws.services.dynamodbv2.local.server.DynamoDBProxyServer;
import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public class Launcher {
	public static void main(String[] args) {
		int port;
		try {
			port = start(args);
		} catch (Throwable t) {
			// Jetty's threads would keep the process alive.
			t.printStackTrace();
			Runtime.getRuntime().halt(1);
			return;
		}
		System.out.println("listening " + port);
		System.out.flush();
		try {
			while (System.in.read() >= 0) {
			}
		} catch (Throwable t) {
			// The same as the end of input.
		}
		Runtime.getRuntime().halt(0);
	}

	static int start(String[] args) throws Exception {
		DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
		Field field = DynamoDBProxyServer.class.getDeclaredField("server");
		field.setAccessible(true);
		Server jetty = (Server) field.get(proxy);
		Connector[] connectors = jetty.getConnectors();
		if (connectors.length != 1 || !(connectors[0] instanceof ServerConnector)) {
			throw new IllegalStateException("expected one ServerConnector, found " + connectors.length + " connectors");
		}
		ServerConnector connector = (ServerConnector) connectors[0];
		connector.setHost("127.0.0.1");
		connector.setPort(0);
		proxy.start();
		return connector.getLocalPort();
	}
}
